"""`<data_dir>/PREPARED.json`: what `prepare` wrote, so `mlperf run` can tell cheaply (and without
importing torch) whether a plan's data is ready.

Each benchmark's `reference_impls/<name>/manifest.py` decides what the manifest records (which
config fields the data depends on, under which key, which format tag) and keeps its on-disk layout;
this module holds the mechanics they share (torch-free: the CLI asks `is_prepared` before it
starts anything): hashing, the atomic write, and the check that the
recorded fields still match and every listed file is there with its recorded size and, with
`verify`, sha256. Every benchmark verifies its tiny data (a few MB: milliseconds, and a
same-size corruption must not train) and checks full data by size only (re-hashing a multi-TB
dataset on every run is not useful; `prepare` checks its contents). A tiny directory that fails
the check is not prepared, so `mlperf run` prepares it again (tiny data is regenerated).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from harness.core.files import atomic_write, sha256_file

MANIFEST = "PREPARED.json"


def sha256(path: str | Path) -> str:
    return sha256_file(path, chunk=1 << 22)


def file_entries(
    root: str | Path, files: Iterable[str | Path], size_key: str = "bytes", hash_files: bool = True
) -> dict:
    """{path relative to root: {size_key: bytes, "sha256": ...}}; files are absolute or relative to root."""
    root = Path(root)
    out = {}
    for f in sorted({root / f for f in files}):
        out[str(f.relative_to(root))] = {
            size_key: f.stat().st_size,
            **({"sha256": sha256(f)} if hash_files else {}),
        }
    return out


def write(data_dir: str | Path, doc: dict) -> Path:
    """Write the manifest atomically: a crash mid-write leaves no manifest rather than a torn one."""
    out = Path(data_dir) / MANIFEST
    atomic_write(out, json.dumps(doc, indent=1, sort_keys=True))
    return out


def read(data_dir: str | Path) -> dict | None:
    try:
        m = json.loads((Path(data_dir) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) else None


def check(data_dir: str | Path, expect: dict, size_key: str = "bytes", verify: bool = False) -> dict | None:
    """The manifest when it records `expect` (compared as JSON would store it: tuples read back as
    lists) and every file it lists has its recorded size (and sha256 with verify: an entry
    without one fails); else None."""
    m = read(data_dir)
    if m is None or {k: m.get(k) for k in expect} != json.loads(json.dumps(expect)):
        return None
    root = Path(data_dir)
    for rel, info in (m.get("files") or {}).items():
        p = root / rel
        if not p.is_file() or p.stat().st_size != info.get(size_key):
            return None
        if verify and sha256(p) != info.get("sha256"):
            return None
    return m
