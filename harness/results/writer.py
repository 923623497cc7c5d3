"""The only code that creates files in a submission tree, always atomically.

    results/<org>/systems/<system>.json
    results/<org>/results/<system>/<benchmark>/result_<i>.txt

A finished run's log is *claimed* into the next free `result_<i>.txt` with `os.link`, which is
atomic and fails if the name exists: two `mlperf run` processes writing the same tree never
clobber or renumber each other's results, and a log still being written never sits under a
`result_<i>.txt` name.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

RESULT_RE = re.compile(r"^result_(\d+)\.txt$")


def atomic_write(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def result_dir(results_root: Path, org: str, system: str, benchmark: str) -> Path:
    return Path(results_root) / org / "results" / system / benchmark


def write_system_json(results_root: Path, org: str, system: str, official: dict) -> Path:
    path = Path(results_root) / org / "systems" / f"{system}.json"
    atomic_write(path, json.dumps(official, indent=4) + "\n")
    return path


def existing_results(folder: Path) -> list[int]:
    if not Path(folder).is_dir():
        return []
    return sorted(int(m.group(1)) for p in Path(folder).iterdir() if (m := RESULT_RE.match(p.name)))


def claim_result(log_path: Path, folder: Path) -> Path:
    """Hard-link the finished log as the lowest free result_<i>.txt; return its path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    i = 0
    taken = set(existing_results(folder))
    while True:
        if i not in taken:
            target = folder / f"result_{i}.txt"
            try:
                os.link(log_path, target)
                return target
            except FileExistsError:
                taken.add(i)  # another process claimed it first; try the next
        i += 1


def replace_result(log_path: Path, target: Path) -> Path:
    """Atomically point an existing result_<i>.txt at a new log (a resumed run takes over the
    number its interrupted attempt claimed: no renumbering, no second result for one run)."""
    target = Path(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.link")
    tmp.unlink(missing_ok=True)
    os.link(log_path, tmp)
    os.replace(tmp, target)
    return target
