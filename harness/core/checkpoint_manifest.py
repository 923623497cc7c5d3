"""Torch-free half of run checkpoints: the on-disk format, verification, and the newest good one.

    <root>/step_00000040/...            the state files (one per rank, or a sharded checkpoint)
    <root>/step_00000040/manifest.json  step, world size, size and sha256 of every state file,
                                        the run-wide and per-rank scalars

`mlperf run --resume` (harness/run/resume.py) picks `latest_good(root)` without importing torch;
the ranks write and read checkpoints through harness/train/checkpoint.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from harness.core.files import sha256_file

FORMAT = "mlperf-harness-checkpoint"
VERSION = 1
MANIFEST = "manifest.json"
STEP_RE = re.compile(r"^step_(\d+)$")
PARTIAL_RE = re.compile(r"^\.step_(\d+)\.partial$")


class CheckpointError(Exception):
    """A checkpoint that cannot be used (missing, torn, wrong world size, bad content)."""


def step_dir(root: Path, step: int) -> Path:
    return Path(root) / f"step_{step:08d}"


def rank_file(rank: int) -> str:
    return f"rank_{rank:05d}.pt"


@dataclass
class Found:
    step: int
    path: Path
    manifest: dict


def list_steps(root: Path) -> list[tuple[int, Path]]:
    root = Path(root)
    if not root.is_dir():
        return []
    out = [(int(m.group(1)), p) for p in root.iterdir() if (m := STEP_RE.match(p.name)) and p.is_dir()]
    return sorted(out)


def verify(path: Path, world_size: int | None = None, deep: bool = True) -> dict:
    """The manifest of the checkpoint in `path` if every file is present and intact, else raise
    CheckpointError saying what is wrong. `deep=False` checks sizes only (no hashing)."""
    path = Path(path)
    mpath = path / MANIFEST
    try:
        manifest = json.loads(mpath.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no {MANIFEST} (checkpoint was not completed)") from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{mpath}: unreadable manifest ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckpointError(f"{mpath}: not a {FORMAT} manifest")
    if manifest.get("version") != VERSION:
        raise CheckpointError(f"{mpath}: version {manifest.get('version')} (this harness reads {VERSION})")
    if world_size is not None and manifest.get("world_size") != world_size:
        raise CheckpointError(
            f"{path}: written by {manifest.get('world_size')} ranks, this run has {world_size}"
        )
    files = manifest.get("files") or {}
    if len(files) != manifest.get("world_size"):
        raise CheckpointError(
            f"{mpath}: lists {len(files)} rank files for world size {manifest.get('world_size')}"
        )
    for name, info in files.items():
        f = path / name
        if not f.is_file():
            raise CheckpointError(f"{f}: missing")
        size = f.stat().st_size
        if size != info.get("bytes"):
            raise CheckpointError(f"{f}: {size} bytes, manifest says {info.get('bytes')} (torn write)")
        if deep and sha256_file(f) != info.get("sha256"):
            raise CheckpointError(f"{f}: sha256 mismatch (corrupt)")
    return manifest


def latest_good(
    root: Path, world_size: int | None = None, deep: bool = True, problems: list[str] | None = None
) -> Found | None:
    """Newest checkpoint under `root` that verifies; bad ones are skipped (reasons appended to
    `problems`). None when there is none."""
    for step, path in reversed(list_steps(root)):
        try:
            return Found(step, path, verify(path, world_size, deep))
        except CheckpointError as e:
            if problems is not None:
                problems.append(str(e))
    return None
