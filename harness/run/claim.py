"""The only code that creates files in a submission tree, always atomically (paths: core/tree.py).

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
from pathlib import Path

from harness.core.errors import ConfigError
from harness.core.files import atomic_write
from harness.core.tree import existing_results, system_json

ALLOW_FLAG = "--allow-extra-runs"


def refuse_full_folder(folder: Path, need: int, adding: int, allow: bool) -> None:
    """A result is `need` runs (runs_per_result); a folder that would hold more is no submission
    (the checker counts the files) and an eleventh run written silently looks like a result.
    Refuse, before anything is written, when the `adding` new runs would take the folder past
    `need`, unless `allow` (--allow-extra-runs)."""
    held = existing_results(folder)
    if allow or adding <= 0 or len(held) + adding <= need:
        return
    raise ConfigError(
        f"{folder} already holds {len(held)} result file(s) of the {need} a result needs; {adding} more "
        f"run(s) would make {len(held) + adding}: pass {ALLOW_FLAG} to add them anyway, or start a fresh "
        "result with --results-dir <another tree> (or move that folder away)"
    )


def write_system_json(results_root: Path, org: str, system: str, official: dict) -> Path:
    path = system_json(results_root, org, system)
    atomic_write(path, json.dumps(official, indent=4) + "\n")
    return path


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
