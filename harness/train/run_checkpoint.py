"""A run's resumable checkpoints, as every benchmark loop takes them (`mlperf run --resume`).

    ck = RunCheckpointer(rt, every=cfg.checkpoint_interval_steps)
    meta = ck.resume(apply)          # resumed run: verify, load, apply(state, meta), restore RNG
    ...                              #   (None for a new run)
    if ck.due(step):                 # where the log is consistent (after an eval, before a block)
        ck.save(step, {"model": ..., "optimizer": ...}, meta={"samples": n})

Besides the benchmark's state and scalars, a checkpoint holds every RNG of each rank (rng.py), the
step, and on rank 0 the size of the MLPerf log so far (`log_offset`: `mlperf run --resume` keeps
the log up to there, harness/run/resume.py). A checkpoint that does not verify or load is one
HarnessError line (exit 2) on every rank: the ranks agree before any of them goes on.

Sharded state: a benchmark whose model/optimizer state is sharded over ranks passes `sharded=`, an
object with `write(folder)` and `read(folder)`, collectives every rank calls with the step's
`sharded/` folder (megatron-core dist_checkpointing, torch.distributed.checkpoint); the rank files
then hold the per-rank rest (RNG states). The step folder, the atomic commit, the manifest (sha256
of every file, hashed by all ranks in parallel), rotation and `latest_good` are the same either way
(checkpoint.py, harness/core/checkpoint_manifest.py); every file the sharded writer leaves and its
folders are fsynced (each rank its share) before the manifest commits them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from harness.core.errors import USAGE, HarnessError
from harness.core.runfolder import checkpoint_root
from harness.train.checkpoint import SHARDED, Checkpointer, CheckpointError, verify
from harness.train.rng import capture_rng, restore_rng


class ShardedState(Protocol):
    def write(self, folder: Path) -> None:
        """Every rank: write this rank's shards into `folder` (empty, shared by all ranks)."""

    def read(self, folder: Path) -> None:
        """Every rank: load this rank's shards from `folder` into the live model/optimizer."""


class ModelState:
    """The ShardedState of a model and its optimizer, from a benchmark's collective
    `save(model, optimizer, folder)` and `load(model, optimizer, folder)` in its framework's
    sharded format (megatron dist_checkpointing for the Megatron-GPT family; the plain-torch loops'
    torch.distributed.checkpoint state is dcp_state.DcpState)."""

    def __init__(self, save, load, model, optimizer):
        self._save, self._load, self.model, self.optimizer = save, load, model, optimizer

    def write(self, folder: Path) -> None:
        self._save(self.model, self.optimizer, folder)

    def read(self, folder: Path) -> None:
        self._load(self.model, self.optimizer, folder)


class RunCheckpointer:
    def __init__(self, rt, every: int | None, sharded: ShardedState | None = None, keep: int = 2):
        """`every`: save when `due(step)`, i.e. at least `every` steps after the last save (or the
        resumed step); 0/None: never."""
        barrier = _barrier if rt.world_size > 1 else None
        self.rt, self.every, self.sharded = rt, every or 0, sharded
        self.ck = Checkpointer(checkpoint_root(rt.plan.run_dir), rt.rank, rt.world_size, keep, barrier)
        self.last = 0

    def due(self, step: int) -> bool:
        return bool(self.every) and step - self.last >= self.every

    def save(self, step: int, state: dict | None = None, meta: dict | None = None) -> Path:
        """Every rank: save after `step` optimizer steps. `state`: this rank's tensors and plain
        containers (the rank file); `meta`: run-wide JSON scalars (rank 0's count)."""
        meta = {**(meta or {}), "step": step}
        if self.rt.is_rank0:
            meta["log_offset"] = Path(self.rt.plan.log_path).stat().st_size  # the log up to here
        write = self.sharded.write if self.sharded is not None else None
        path = self.ck.save(step, {**(state or {}), "rng": capture_rng()}, meta, {"step": step}, write)
        self.last = step
        return path

    def resume(self, apply: Callable[[dict, dict], None] | None = None) -> dict | None:
        """For a resumed run (`plan.resume_from`): every rank verifies its share of the checkpoint
        (sha256), loads its rank file and the sharded state, calls `apply(state, meta)` (the
        benchmark puts the state into its model/optimizer/generators; raise HarnessError when it
        does not fit), then restores the RNGs. Returns the run-wide meta (with "step"); None for a
        new run."""
        plan, rt = self.rt.plan, self.rt
        if not plan.resume_from:
            return None
        path = Path(plan.resume_from)
        problem, state, manifest = None, None, None
        try:
            verify(path, rt.world_size, share=(rt.rank, rt.world_size))
            state, manifest = self.ck.load(path, verified=True)
        except CheckpointError as e:
            problem = str(e)
        if rt.any_rank(problem is not None):
            raise HarnessError(
                f"cannot resume: {problem or f'{path}: damaged (found by another rank)'}", USAGE
            )
        if self.sharded is not None:
            self.sharded.read(path / SHARDED)
        assert state is not None and manifest is not None  # no rank found a problem: this one loaded
        meta = manifest["meta"]
        if apply is not None:
            apply(state, meta)
        restore_rng(state["rng"])
        self.last = int(meta["step"])
        if rt.is_rank0:
            print(f"resumed from {path} at step {self.last}", flush=True)
        return meta


def _barrier() -> None:
    import torch.distributed as dist

    dist.barrier()
