"""Resumable training checkpoints: atomic, checksummed, rotated, loaded without unpickling.

    <root>/step_00000040/rank_00000.pt     one file per rank: tensors + plain containers only
    <root>/step_00000040/sharded/...       optional: a sharded checkpoint all ranks write together
    <root>/step_00000040/manifest.json     rank 0, last: step, world size, sha256 and size of every
                                           file, per-rank and global scalars

    ck = Checkpointer(Path(plan.run_dir) / "checkpoints", rank, world, barrier=dist.barrier)
    ck.save(step, {"model": ..., "optimizer": ..., "rng": capture_rng()}, meta={"samples": n})
    ck.save(step, {"rng": capture_rng()}, write=lambda folder: dist_checkpointing.save(sd, folder))
    found = latest_good(root)                   # torch-free: newest checkpoint whose files verify
    state, manifest = ck.load(found.path)       # this rank's file, sha256-checked, weights_only

Atomicity: every rank writes into `.step_N.partial/` (temp file, fsync, rename; a sharded writer
into `.step_N.partial/sharded/`), all ranks meet at a barrier, fsync and hash their share of the
files (`hash_share`: each rank its own file and a size-balanced part of the rest, in parallel: the
frameworks' savers leave some files unsynced, e.g. megatron's common.pt and metadata.json), meet
again, and rank 0 fsyncs the folders (sharded/ and below, the step folder), writes the manifest the
same way and renames the folder to `step_N` (then fsyncs the parent), so a crash or power loss at
any instant leaves either a complete `step_N` or a `.partial` folder that is ignored and later
swept. A torn or corrupted file fails its sha256 and `latest_good` falls
back to the previous checkpoint; rotation keeps `keep` (>= 2) good ones for that reason.

Loading never unpickles arbitrary objects: rank files are read with `torch.load(weights_only=True)`
(tensors, dicts, lists, tuples, str/int/float/bool/None only; `save` refuses anything else), RNG
states are stored as tensors (rng.py), and scalars that are not tensors live in the JSON manifest.

This module imports torch only inside `save`/`load`; the format, `verify` and `latest_good` live in
harness/core/checkpoint_manifest.py (the CLI's `--resume` reads them). The run-level use (when to
save, what besides the benchmark's state, resuming) is harness/train/run_checkpoint.py.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The format, verification and discovery are torch-free (the CLI's --resume reads them).
from harness.core.checkpoint_manifest import (  # noqa: F401 - re-exported for the ranks
    FORMAT,
    MANIFEST,
    NOTES,
    PARTIAL_RE,
    SHARDED,
    VERSION,
    CheckpointError,
    Found,
    hash_share,
    latest_good,
    list_steps,
    rank_file,
    state_files,
    step_dir,
    verify,
)
from harness.core.files import atomic_write_bytes, fsync_dir, fsync_file, sha256_file
from harness.train.rng import capture_rng, restore_rng  # noqa: F401 - re-exported

# ---- what may go into a rank file -------------------------------------------------------------
_SCALARS = (str, int, float, bool, type(None))


def check_loadable(obj: Any, where: str = "state") -> None:
    """Refuse anything `torch.load(weights_only=True)` would not read back (or would have to
    unpickle): only tensors, plain dicts/lists/tuples and scalars are allowed."""
    import torch

    if isinstance(obj, torch.Tensor) or isinstance(obj, _SCALARS):
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, (str, int)):
                raise CheckpointError(f"{where}: key {k!r} of type {type(k).__name__} is not allowed")
            check_loadable(v, f"{where}.{k}")
        return
    if isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            check_loadable(v, f"{where}[{i}]")
        return
    raise CheckpointError(
        f"{where}: {type(obj).__name__} cannot be stored (tensors, dicts, lists, tuples and scalars only)"
    )


def _durable(path: Path, size: int) -> dict:
    """fsync a file of the checkpoint (whoever wrote it), then its manifest entry."""
    fsync_file(path)
    return {"bytes": size, "sha256": sha256_file(path)}


# ---- the writer/reader ----------------------------------------------------------------------
class Checkpointer:
    """Saves and loads this rank's share; rank 0 commits (manifest + rename) and rotates.

    `barrier` must make every rank wait for all others (e.g. `torch.distributed.barrier`); with one
    rank it may be None. With several ranks the folder must be shared by them (the run folder is).
    """

    def __init__(
        self,
        root: Path,
        rank: int = 0,
        world_size: int = 1,
        keep: int = 2,
        barrier: Callable[[], None] | None = None,
    ):
        if keep < 2:
            raise ValueError("keep must be >= 2 so a torn newest checkpoint has a good predecessor")
        if world_size > 1 and barrier is None:
            raise ValueError("several ranks need a barrier")
        self.root = Path(root)
        self.rank, self.world_size, self.keep = rank, world_size, keep
        self._barrier = barrier or (lambda: None)

    def save(
        self, step: int, state: dict, meta: dict | None = None, rank_meta: dict | None = None, write=None
    ) -> Path:
        """Write this rank's `state` (tensors/containers) for `step`. `meta` (rank 0's, JSON) is
        the run-wide scalars (data position, LR-scheduler numbers, log offset); `rank_meta` is
        this rank's JSON scalars. `write(folder: Path)`, when given, is a sharded writer every rank
        calls with the same empty folder `step_N/sharded/` (megatron-core dist_checkpointing,
        torch.distributed.checkpoint); its files are hashed and verified like the rank files.
        A collective: every rank must call it. Returns the folder."""
        import torch

        check_loadable(state)
        json.dumps(meta or {})  # fail early (before any file) on non-JSON scalars
        json.dumps(rank_meta or {})
        t0 = time.perf_counter()
        partial = self.root / f".step_{step:08d}.partial"
        if self.rank == 0:
            shutil.rmtree(partial, ignore_errors=True)
            (partial / NOTES).mkdir(parents=True)
            if write is not None:
                (partial / SHARDED).mkdir()
        self._barrier()
        atomic_write_bytes(partial / rank_file(self.rank), lambda f: torch.save(state, f))
        if write is not None:
            write(partial / SHARDED)
        self._barrier()
        files = state_files(partial)  # every rank's writes are visible after the barrier
        hashed = {n: _durable(partial / n, files[n]) for n in hash_share(files, self.rank, self.world_size)}
        note = json.dumps({"files": hashed, "meta": rank_meta or {}}).encode()
        atomic_write_bytes(partial / NOTES / f"rank_{self.rank:05d}.json", note)
        self._barrier()
        final = step_dir(self.root, step)
        if self.rank == 0:
            self._commit(partial, final, step, meta or {})
        self._barrier()
        self.last_save_s = time.perf_counter() - t0
        return final

    def _commit(self, partial: Path, final: Path, step: int, meta: dict) -> None:
        """Rank 0: merge the ranks' notes into the manifest, rename the folder, rotate."""
        files, ranks = {}, {}
        for r in range(self.world_size):
            doc = json.loads((partial / NOTES / f"rank_{r:05d}.json").read_text())
            files.update(doc["files"])
            ranks[str(r)] = doc["meta"]
        shutil.rmtree(partial / NOTES)
        for name, size in state_files(partial).items():  # one a lagging shared FS hid from a rank
            if name not in files:
                files[name] = _durable(partial / name, size)
        if (partial / SHARDED).is_dir():  # the writers' file names, before the manifest names them
            for d in sorted((p for p in (partial / SHARDED).rglob("*") if p.is_dir()), reverse=True):
                fsync_dir(d)
            fsync_dir(partial / SHARDED)
        fsync_dir(partial)  # the rank files' and sharded/'s entries
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "step": step,
            "world_size": self.world_size,
            "created_unix": time.time(),
            "files": dict(sorted(files.items())),
            "ranks": ranks,
            "meta": meta,
        }
        atomic_write_bytes(partial / MANIFEST, lambda f: f.write(json.dumps(manifest, indent=1).encode()))
        fsync_dir(partial)
        if final.exists():  # re-saving a step (e.g. after a resume): replace it
            shutil.rmtree(final)
        os.replace(partial, final)
        fsync_dir(self.root)
        self._rotate(step)

    def _rotate(self, newest: int) -> None:
        steps = list_steps(self.root)
        for _, path in steps[: max(0, len(steps) - self.keep)]:
            shutil.rmtree(path, ignore_errors=True)
        for p in self.root.iterdir():  # partial folders of older saves that never committed
            m = PARTIAL_RE.match(p.name)
            if m and int(m.group(1)) < newest:
                shutil.rmtree(p, ignore_errors=True)

    def latest(self, problems: list[str] | None = None) -> Found | None:
        return latest_good(self.root, self.world_size, problems=problems)

    def load(self, path: Path, verified: bool = False) -> tuple[dict, dict]:
        """This rank's state from the checkpoint folder `path` and the manifest. The sizes of all
        files are checked, and this rank's file's sha256 unless `verified` (the caller hashed the
        whole checkpoint, e.g. `verify(share=(rank, world))` on every rank). Raises
        CheckpointError when it does not verify or load."""
        import torch

        path = Path(path)
        manifest = verify(path, self.world_size, deep=False)
        name = rank_file(self.rank)
        f = path / name
        if not verified and sha256_file(f) != manifest["files"][name]["sha256"]:
            raise CheckpointError(f"{f}: sha256 mismatch (corrupt)")
        try:
            state = torch.load(f, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - anything torch refuses is a bad checkpoint
            raise CheckpointError(f"{f}: cannot be loaded safely ({type(e).__name__}: {e})") from None
        return state, manifest
