"""Torch-free half of run checkpoints: the on-disk format, verification, and the newest good one.

    <root>/step_00000040/rank_00000.pt  one file per rank (its state, or only its RNG states)
    <root>/step_00000040/sharded/...    a benchmark's sharded checkpoint, when it writes one
                                        (megatron-core dist_checkpointing, torch DCP)
    <root>/step_00000040/manifest.json  step, world size, size and sha256 of every other file in
                                        the folder, the run-wide and per-rank scalars

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
VERSION = 2
READABLE_VERSIONS = (1, 2)  # 1: rank files only (a subset of 2)
MANIFEST = "manifest.json"
SHARDED = "sharded"
NOTES = ".notes"  # the ranks' notes to rank 0 while saving; removed before the commit
STEP_RE = re.compile(r"^step_(\d+)$")
PARTIAL_RE = re.compile(r"^\.step_(\d+)\.partial$")


class CheckpointError(Exception):
    """A checkpoint that cannot be used (missing, torn, wrong world size, bad content)."""


def step_dir(root: Path, step: int) -> Path:
    return Path(root) / f"step_{step:08d}"


def rank_file(rank: int) -> str:
    return f"rank_{rank:05d}.pt"


def state_files(folder: Path) -> dict[str, int]:
    """Every file of a checkpoint folder its manifest lists (POSIX path relative to the folder ->
    bytes), sorted: all files but the manifest and the ranks' notes."""
    folder = Path(folder)
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_file() and rel != MANIFEST and not rel.startswith(f"{NOTES}/"):
            out[rel] = p.stat().st_size
    return out


def hash_share(files: dict[str, int], rank: int, world_size: int) -> list[str]:
    """The files rank `rank` hashes (of `files`: name -> bytes): its own rank file (still in its
    page cache), and of the rest a share balanced by size, largest first to the least loaded rank,
    so that no rank hashes a large sharded checkpoint alone. Every rank computes the same split."""
    load = [0] * world_size
    owner = {}
    for r in range(world_size):
        if rank_file(r) in files:
            owner[rank_file(r)] = r
            load[r] += files[rank_file(r)]
    for name in sorted((n for n in files if n not in owner), key=lambda n: (-files[n], n)):
        r = min(range(world_size), key=lambda i: (load[i], i))
        owner[name] = r
        load[r] += files[name]
    return [n for n in files if owner[n] == rank]


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


def verify(
    path: Path, world_size: int | None = None, deep: bool = True, share: tuple[int, int] | None = None
) -> dict:
    """The manifest of the checkpoint in `path` if every file is present and intact, else raise
    CheckpointError saying what is wrong. `deep=False` checks sizes only (no hashing); `share=
    (rank, world)` hashes only that rank's `hash_share` (the ranks of a resumed run split it)."""
    path = Path(path)
    mpath = path / MANIFEST
    try:
        manifest = json.loads(mpath.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no {MANIFEST} (checkpoint was not completed)") from None
    except (OSError, ValueError) as e:  # ValueError: broken JSON, not UTF-8, a 5,000-digit number
        raise CheckpointError(f"{mpath}: unreadable manifest ({str(e)[:200]})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckpointError(f"{mpath}: not a {FORMAT} manifest")
    if manifest.get("version") not in READABLE_VERSIONS:
        raise CheckpointError(
            f"{mpath}: version {manifest.get('version')} (this harness reads {READABLE_VERSIONS})"
        )
    if world_size is not None and manifest.get("world_size") != world_size:
        raise CheckpointError(
            f"{path}: written by {manifest.get('world_size')} ranks, this run has {world_size}"
        )
    files = manifest.get("files")
    ranks = manifest.get("world_size")
    if not isinstance(files, dict) or not isinstance(ranks, int):
        raise CheckpointError(f"{mpath}: no file list or world size")
    for name, info in files.items():  # an edited or foreign manifest: every entry has its size
        if not isinstance(info, dict) or type(info.get("bytes")) is not int or info["bytes"] < 0:
            raise CheckpointError(f"{mpath}: file {name[:80]!r} has no byte count")
    unlisted = [rank_file(r) for r in range(ranks) if rank_file(r) not in files]
    if unlisted:
        raise CheckpointError(f"{mpath}: lists no {unlisted[0]} for world size {ranks}")
    for name, info in files.items():
        f = path / name
        if not f.is_file():
            raise CheckpointError(f"{f}: missing")
        size = f.stat().st_size
        if size != info.get("bytes"):
            raise CheckpointError(f"{f}: {size} bytes, manifest says {info.get('bytes')} (torn write)")
    if deep:
        sizes = {name: info["bytes"] for name, info in files.items()}
        for name in hash_share(sizes, *share) if share else sizes:
            if sha256_file(path / name) != files[name].get("sha256"):
                raise CheckpointError(f"{path / name}: sha256 mismatch (corrupt)")
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
