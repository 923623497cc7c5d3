"""Resumable training checkpoints: atomic, checksummed, rotated, loaded without unpickling.

    <root>/step_00000040/rank_00000.pt     one file per rank: tensors + plain containers only
    <root>/step_00000040/manifest.json     rank 0, after a barrier: step, world size, sha256 and
                                           size of every rank file, per-rank and global scalars

    ck = Checkpointer(Path(plan.run_dir) / "checkpoints", rank, world, barrier=dist.barrier)
    ck.save(step, {"model": ..., "optimizer": ..., "rng": capture_rng()}, meta={"samples": n})
    found = latest_good(root)                   # torch-free: newest checkpoint whose files verify
    state, manifest = ck.load(found.path)       # this rank's file, sha256-checked, weights_only

Atomicity: every rank writes into `.step_N.partial/` (temp file, fsync, rename), all ranks meet at
a barrier, rank 0 writes the manifest the same way and renames the folder to `step_N` (then fsyncs
the parent), so a crash at any instant leaves either a complete `step_N` or a `.partial` folder
that is ignored and later swept. A torn or corrupted file fails its sha256 and `latest_good` falls
back to the previous checkpoint; rotation keeps `keep` (>= 2) good ones for that reason.

Loading never unpickles arbitrary objects: rank files are read with `torch.load(weights_only=True)`
(tensors, dicts, lists, tuples, str/int/float/bool/None only; `save` refuses anything else), RNG
states are stored as tensors, and scalars that are not tensors live in the JSON manifest.

This module imports torch only inside `save`/`load`/RNG helpers; the format, `verify` and
`latest_good` live in harness/core/checkpoint_manifest.py (the CLI's `--resume` reads them).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The format, verification and discovery are torch-free (the CLI's --resume reads them).
from harness.core.checkpoint_manifest import (  # noqa: F401 - re-exported for the ranks
    FORMAT,
    MANIFEST,
    PARTIAL_RE,
    VERSION,
    CheckpointError,
    Found,
    latest_good,
    list_steps,
    rank_file,
    step_dir,
    verify,
)
from harness.core.files import atomic_write_bytes, fsync_dir, sha256_file

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


# ---- RNG states as tensors ------------------------------------------------------------------
def capture_rng() -> dict:
    """Every RNG this process uses, as tensors: torch CPU, CUDA (all devices), Python `random`,
    NumPy's global generator and megatron's model-parallel RNG tracker when it is in use."""
    import sys

    import numpy as np
    import torch

    out: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = list(torch.cuda.get_rng_state_all())
    version, internal, gauss = random.getstate()
    out["python"] = {
        "version": torch.tensor(version),
        "state": torch.tensor(internal, dtype=torch.int64),
        "gauss": torch.tensor(float("nan") if gauss is None else gauss, dtype=torch.float64),
    }
    name, keys, pos, has_gauss, cached = np.random.get_state()
    out["numpy"] = {
        "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
        "meta": torch.tensor([pos, has_gauss], dtype=torch.int64),
        "cached": torch.tensor(cached, dtype=torch.float64),
    }
    if "megatron.core.tensor_parallel.random" in sys.modules:
        tracker = sys.modules["megatron.core.tensor_parallel.random"].get_cuda_rng_tracker()
        states = tracker.get_states()
        if states:
            out["megatron_tracker"] = {k: v.clone().cpu() for k, v in states.items()}
    return out


def restore_rng(state: dict) -> None:
    import sys

    import numpy as np
    import torch

    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    py = state["python"]
    gauss = float(py["gauss"])
    random.setstate(
        (int(py["version"]), tuple(int(x) for x in py["state"].tolist()), None if gauss != gauss else gauss)
    )
    n = state["numpy"]
    pos, has_gauss = (int(x) for x in n["meta"].tolist())
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), pos, has_gauss, float(n["cached"])))
    if "megatron_tracker" in state and "megatron.core.tensor_parallel.random" in sys.modules:
        tracker = sys.modules["megatron.core.tensor_parallel.random"].get_cuda_rng_tracker()
        tracker.set_states(state["megatron_tracker"])


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

    def save(self, step: int, state: dict, meta: dict | None = None, rank_meta: dict | None = None) -> Path:
        """Write this rank's `state` (tensors/containers) for `step`. `meta` (rank 0's, JSON) is
        the run-wide scalars (data position, LR-scheduler numbers, log offset); `rank_meta` is
        this rank's JSON scalars. A collective: every rank must call it. Returns the folder."""
        import torch

        check_loadable(state)
        json.dumps(meta or {})  # fail early (before any file) on non-JSON scalars
        json.dumps(rank_meta or {})
        t0 = time.perf_counter()
        self.root.mkdir(parents=True, exist_ok=True)
        partial = self.root / f".step_{step:08d}.partial"
        final = step_dir(self.root, step)
        if self.rank == 0:
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
        self._barrier()
        name = rank_file(self.rank)
        atomic_write_bytes(partial / name, lambda f: torch.save(state, f))
        info = {"bytes": (partial / name).stat().st_size, "sha256": sha256_file(partial / name)}
        atomic_write_bytes(
            partial / f"rank_{self.rank:05d}.json",
            lambda f: f.write(json.dumps({"file": info, "meta": rank_meta or {}}).encode()),
        )
        self._barrier()
        if self.rank == 0:
            files, ranks = {}, {}
            for r in range(self.world_size):
                doc = json.loads((partial / f"rank_{r:05d}.json").read_text())
                files[rank_file(r)] = doc["file"]
                ranks[str(r)] = doc["meta"]
            manifest = {
                "format": FORMAT,
                "version": VERSION,
                "step": step,
                "world_size": self.world_size,
                "created_unix": time.time(),
                "files": files,
                "ranks": ranks,
                "meta": meta or {},
            }
            atomic_write_bytes(partial / MANIFEST, lambda f: f.write(json.dumps(manifest, indent=1).encode()))
            fsync_dir(partial)
            if final.exists():  # re-saving a step (e.g. after a resume): replace it
                shutil.rmtree(final)
            os.replace(partial, final)
            fsync_dir(self.root)
            self._rotate(step)
        self._barrier()
        self.last_save_s = time.perf_counter() - t0
        return final

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

    def load(self, path: Path) -> tuple[dict, dict]:
        """This rank's state from the checkpoint folder `path` (its sha256 re-checked) and the
        manifest. Raises CheckpointError when it does not verify."""
        import torch

        path = Path(path)
        manifest = verify(path, self.world_size, deep=False)
        name = rank_file(self.rank)
        f = path / name
        if sha256_file(f) != manifest["files"][name]["sha256"]:
            raise CheckpointError(f"{f}: sha256 mismatch (corrupt)")
        try:
            state = torch.load(f, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - anything torch refuses is a bad checkpoint
            raise CheckpointError(f"{f}: cannot be loaded safely ({type(e).__name__}: {e})") from None
        return state, manifest
