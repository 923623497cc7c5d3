"""Paths and read-only facts of an MLPerf submission tree (the writing is `harness/run/claim.py`).

<root>/<org>/systems/<system>.json
<root>/<org>/results/<system>/<benchmark>/result_<i>.txt   (+ scaling.json, power/)
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
from pathlib import Path

from harness.core.files import open_input

RESULT_RE = re.compile(r"^result_(\d+)\.txt$")


def result_dir(results_root: str | Path, org: str, system: str, benchmark: str) -> Path:
    return Path(results_root) / org / "results" / system / benchmark


def system_json(results_root: str | Path, org: str, system: str) -> Path:
    return Path(results_root) / org / "systems" / f"{system}.json"


def existing_results(folder: str | Path) -> list[int]:
    """Run numbers i of the result_<i>.txt files in `folder`, sorted."""
    if not Path(folder).is_dir():
        return []
    return sorted(int(m.group(1)) for p in Path(folder).iterdir() if (m := RESULT_RE.match(p.name)))


def result_files(folder: str) -> list[str]:
    """The result_*.txt files of a folder, as the official tools glob them, in run order."""
    files = glob.glob(os.path.join(glob.escape(folder), "result_*.txt"))

    def key(p):
        stem = os.path.basename(p)[len("result_") : -len(".txt")]
        return (0, int(stem), "") if stem.isdigit() else (1, 0, stem)

    return sorted(files, key=key)


def header_groups(folder: str | Path, key: str) -> dict[str, list[str]]:
    """{value: [result file names]} of `key` in the headers of the logs in `folder`: our runs log
    `harness_ruleset` and `harness_size`; logs without the key are left out."""
    from harness.core.mllog_reader import header_value

    out: dict[str, list[str]] = {}
    for f in result_files(str(folder)):
        v = header_value(f, key)
        if isinstance(v, str):
            out.setdefault(v, []).append(os.path.basename(f))
    return out


def rulesets_in(folder: str | Path) -> dict[str, list[str]]:
    """{ruleset: [result file names]} (`harness_ruleset`). One submission folder holds one round's
    runs, so more than one key is a mixed folder."""
    return header_groups(folder, "harness_ruleset")


def sizes_in(folder: str | Path) -> dict[str, list[str]]:
    """{size: [result file names]} (`harness_size`): a tiny run beside full-size ones is a smoke
    test in a submission folder."""
    return header_groups(folder, "harness_size")


def mixed_folder(folder: str | Path) -> list[str]:
    """A line for each header that should be one value per folder and is not (ruleset, size),
    naming each value and its logs; [] for a folder of one round and one size."""
    lines = []
    for what, found in (("rulesets", rulesets_in(folder)), ("sizes", sizes_in(folder))):
        if len(found) > 1:
            parts = "; ".join(f"{v}: {', '.join(names)}" for v, names in found.items())
            lines.append(f"its logs ran under {len(found)} {what} ({parts})")
    return lines


def find_result_dirs(root: str | os.PathLike) -> list[str]:
    """Every folder at or under `root` holding result_*.txt files (symlinked dirs not followed)."""
    root = os.path.abspath(os.fspath(root))
    if result_files(root):
        return [root]
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in ("power", ".git", "runs"))
        if any(f.startswith("result_") and f.endswith(".txt") for f in filenames):
            found.append(dirpath)
    return found


def read_scaling(folder: str) -> tuple[float, str | None]:
    """(factor, problem) from the committed scaling.json; 1.0 when there is none."""
    path = os.path.join(folder, "scaling.json")
    if not os.path.isfile(path):
        return 1.0, None
    try:
        with open_input(path, encoding="utf-8") as f:
            factor = json.load(f)["scaling_factor"]
        factor = float(factor)
        if not math.isfinite(factor) or factor <= 0:
            raise ValueError(factor)
        return factor, None
    except (OSError, ValueError, KeyError, TypeError) as e:
        return (
            1.0,
            f"scaling.json is unreadable ({type(e).__name__}: {e}); fix or delete it (factor 1.0 used)",
        )


def load_system(org_dir: str | None, system: str) -> tuple[dict | None, str | None]:
    """(system description, None) or (None, problem) for <org_dir>/systems/<system>.json."""
    if org_dir is None:
        return None, "not inside <org>/results/<system>/: no systems JSON to read"
    path = os.path.join(org_dir, "systems", system + ".json")
    try:
        with open_input(path, encoding="utf-8") as f:
            desc = json.load(f)
    except FileNotFoundError:
        return None, f"missing systems/{system}.json (write it with `mlperf systems export`)"
    except (OSError, ValueError) as e:
        return None, f"systems/{system}.json is unreadable: {e}"
    if not isinstance(desc, dict):
        return None, f"systems/{system}.json is not a JSON object"
    return desc, None


def system_count(value) -> int | None:
    """A count field of an official system-description JSON, written as a string of digits
    ("8"): its value, or None when the string is anything else ("-4", "8.5", "eight", 400 digits)."""
    if not isinstance(value, str):
        return None
    v = value.strip()
    return int(v) if v.isdigit() and len(v) <= 7 else None
