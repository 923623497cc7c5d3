"""`<data_dir>/PREPARED.json`: what `prepare` wrote, so `mlperf run` can tell cheaply (and without
importing torch) whether a plan's data is ready. One shape for every benchmark:

    {"format": FORMAT, "benchmark": "gpt3", "size": "tiny", "version": 1,
     "fields": {config field: value, ...},        # what the data depends on (DataManifest.fields)
     "files": {relative path: {"bytes": n, "sha256": "..."}, ...},   # sha256 at tiny size only
     "facts": {...}}                              # what prepare measured (e.g. a pretraining loss)

A benchmark declares its `DataManifest` (the fields, the tiny generator's knobs, its data version)
in its Implementation; `prepare` calls `write`, `mlperf run` calls `is_prepared` before it starts
anything. Tiny data is verified by sha256 (a few MB: milliseconds, and a same-size corruption must
not train), full data by size only (re-hashing a multi-TB dataset on every run is not useful;
`prepare` checks its contents). A folder that fails the check -- a changed file, another config,
an older FORMAT or `version` -- is not prepared, so `mlperf run` prepares it again (tiny data is
regenerated; full data re-validated), never fails on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.files import atomic_write, sha256_file

MANIFEST = "PREPARED.json"
FORMAT = "mlperf-harness/prepared/2"
"""Bumped from the three per-benchmark shapes of format 1: folders written by those re-prepare."""


def sha256(path: str | Path) -> str:
    return sha256_file(path, chunk=1 << 22)


def file_entries(root: str | Path, files: Iterable[str | Path], hash_files: bool = True) -> dict:
    """{path relative to root: {"bytes": size, "sha256": ...}}; files are absolute or relative to root."""
    root = Path(root)
    out = {}
    for f in sorted({root / f for f in files}):
        out[str(f.relative_to(root))] = {
            "bytes": f.stat().st_size,
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


def check(data_dir: str | Path, expect: dict, verify: bool = False) -> dict | None:
    """The manifest when it records `expect` (compared as JSON would store it: tuples read back as
    lists) and every file it lists has its recorded size (and sha256 with verify: an entry
    without one fails); else None."""
    m = read(data_dir)
    if m is None or {k: m.get(k) for k in expect} != json.loads(json.dumps(expect)):
        return None
    root = Path(data_dir)
    for rel, info in (m.get("files") or {}).items():
        p = root / rel
        if not p.is_file() or p.stat().st_size != info.get("bytes"):
            return None
        if verify and sha256(p) != info.get("sha256"):
            return None
    return m


@dataclass(frozen=True)
class DataManifest:
    """What a benchmark's prepared data folder records, and the torch-free check of it."""

    fields: tuple[str, ...]
    """Config fields the data depends on at every size (tiny: generated from them; full: checked
    against them)."""
    tiny_fields: tuple[str, ...] = ()
    """Config fields only the tiny generator reads (its knobs and seeds)."""
    version: int = 1
    """The benchmark's data version: bump it when the generator or what prepare writes changes,
    and every older folder is prepared again."""

    def expect(self, plan: Any) -> dict:
        """The manifest's keys a plan's data must match (plan: a RunPlan or anything with
        benchmark, size and config)."""
        keys = self.fields + (self.tiny_fields if plan.size == "tiny" else ())
        return {
            "format": FORMAT,
            "benchmark": plan.benchmark,
            "size": plan.size,
            "version": self.version,
            "fields": {k: plan.config.get(k) for k in keys},
        }

    def write(self, plan: Any, files: Iterable[str | Path], facts: dict | None = None) -> Path:
        """Write PREPARED.json for `files` (absolute or relative to plan.data_dir), last and
        atomically; sha256 of every file at tiny size, sizes only at full size."""
        entries = file_entries(plan.data_dir, files, hash_files=plan.size == "tiny")
        return write(plan.data_dir, {**self.expect(plan), "files": entries, "facts": facts or {}})

    def read(self, plan: Any) -> dict | None:
        return read(plan.data_dir)

    def is_prepared(self, plan: Any) -> bool:
        """True when plan.data_dir holds this plan's data: the manifest matches `expect(plan)` and
        lists files, each of its recorded size (and sha256 at tiny size)."""
        m = check(plan.data_dir, self.expect(plan), verify=plan.size == "tiny")
        return bool(m and m.get("files"))  # a manifest that lists nothing proves nothing
