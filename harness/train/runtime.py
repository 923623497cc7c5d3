"""What every training process does first: read its plan, join the process group, set threads,
open the MLPerf log on rank 0, and turn SIGINT/SIGTERM into a flag checked at step boundaries.

    rt = runtime.start(plan_path, Gpt3Config)   # harness/train/entry.py, in every rank: Runtime[Gpt3Config]
    ...                                  # train; `if rt.should_stop(step)` at step boundaries
    rt.finish(success)                   # run_stop{status}, destroy the process group

torchrun/srun provide RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT; a single local process
gets a one-rank group so that megatron-core's parallel_state works the same way.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from harness.core.mllog import MLLog
from harness.core.runfolder import resume_marker
from harness.core.runplan import RunPlan


@dataclass
class Runtime[C: BaseModel]:
    """One rank's view of its run; generic over the benchmark's typed config, so a training loop
    typed `run(rt: Runtime[Gpt3Config])` has `rt.cfg.hidden_size` checked by the type checker."""

    plan: RunPlan
    rank: int
    world_size: int
    local_rank: int
    device: str
    """'cpu' or 'cuda:<local rank>'."""
    log: MLLog
    """The MLPerf log (rank 0 writes; other ranks' calls are no-ops)."""
    cfg: C
    """The plan's config as the benchmark's typed class."""
    stop_requested: bool = False
    """SIGINT/SIGTERM arrived (set by the handler; `should_stop` agrees it over the ranks)."""
    signal_received: int | None = None
    """Which signal, for the exit code (130)."""

    @property
    def is_rank0(self) -> bool:
        return self.rank == 0

    def hyperparameters(self, *fields: str) -> dict:
        """The hyperparameters `log.header` logs: global_batch_size, the layout's
        gradient_accumulation_steps, then the typed config's `fields` under their own names (the
        configs use the rules' vocabulary)."""
        logged = {"global_batch_size": self.plan.layout.global_batch_size}
        logged["gradient_accumulation_steps"] = self.plan.layout.grad_accum
        return logged | {f: getattr(self.cfg, f) for f in fields}

    def should_stop(self, step: int = 0, every_on_gpu: int = 20) -> bool:
        """The stop decision, agreed by every rank: a signal reaches ranks at slightly different
        times, and a rank that stops alone leaves the others blocked in a collective (or failing
        it). Call at the same step on all ranks. On GPUs the all-reduce is a host sync, so it
        runs only every `every_on_gpu` steps (1 where the caller checks rarely anyway); on CPU
        (gloo) it costs microseconds, every step."""
        if self.world_size > 1 and self.device != "cpu" and step % every_on_gpu:
            return False
        # Return the agreed value, never the local flag read again: a signal handled right after
        # the all-reduce returns sets the flag on this rank only, and that rank would stop alone
        # while the others run into the next step's collective ("Connection closed by peer").
        # The late signal is agreed at the next boundary instead.
        agreed = self.any_rank(self.stop_requested)
        if agreed:
            self.stop_requested = True
        return agreed

    def any_rank(self, flag: bool) -> bool:
        """True on every rank when `flag` is True on any of them (a collective: all ranks call it)."""
        if self.world_size == 1:
            return bool(flag)
        import torch
        import torch.distributed as dist

        t = torch.tensor([1 if flag else 0], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def more_power_readings(self) -> bool:
        """Power mode, after the target is reached: True on every rank while some node's sampler
        has fewer than plan.power_min_readings readings since run_start. The benchmark then logs
        run_stop (time-to-train ends there) and keeps its training loop going, same code and
        markers, until this turns False (rules: 60 readings in the measurement window). Rank 0
        reads the raw streams in the run folder (harness/run/power/capture.py writes them); the
        answer is agreed so that every rank steps on together. A collective: all ranks call it."""
        need = self.plan.power_min_readings
        if not need:
            return False
        short = False
        if self.is_rank0 and self.log.run_start_ms is not None:
            fewest, silent_s = _fewest_readings(Path(self.plan.run_dir), self.log.run_start_ms)
            # a sampler silent for SILENT_S has died: training on would wait for nothing (the
            # run layer then claims the result without energy and says why)
            short = fewest < need and silent_s < SILENT_S
        return self.any_rank(short)

    def finish(self, success: bool, metadata: dict | None = None) -> int:
        """Write run_stop if training did not, close the log; return the process exit code."""
        if self.log.run_started:
            self.log.run_stop(success, metadata)
        self.log.close()
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
        if self.signal_received is not None:
            return 130
        return 0 if success else 3


SILENT_S = 5.0


def _fewest_readings(run_dir: Path, since_ms: int) -> tuple[int, float]:
    """(the smallest count of readings at or after since_ms over the nodes' raw streams, the
    seconds since the stalest stream's last line); no stream at all = (0, inf)."""
    import time

    from harness.core.power_stream import lines, nodes, raw_path

    counts, last = [], []
    for i in nodes(run_dir):
        recs = lines(raw_path(run_dir, i))
        counts.append(sum("w" in r and r["t_ms"] >= since_ms for r in recs))
        last.append(max((r.get("t_ms", 0) for r in recs), default=0))
    if not counts:
        return 0, float("inf")
    return min(counts), time.time() - min(last) / 1000


def init_one_process_group(backend: str) -> None:
    """A world of one rank, rendezvous through an in-process store: no TCP port at all. A port
    found free and bound later by c10d races with every other process doing the same; on the GPU
    check machine, six runs started at once and gpt3's prepare lost (EADDRINUSE)."""
    import torch.distributed as dist

    dist.init_process_group(backend, rank=0, world_size=1, store=dist.HashStore())


def start[C: BaseModel](
    plan_path: str | Path, config: type[C], init_process_group: bool = True
) -> Runtime[C]:
    """Read the plan (its config validated as `config`), join the process group, open the log."""
    import torch

    plan = RunPlan.load(Path(plan_path))
    cfg = config.model_validate(plan.config)
    # A Slurm prologue that dropped the page cache (or tried and failed) says so here, so the
    # logged cache_clear is the truth about this run.
    if os.environ.get("MLPERF_CACHE_CLEARED") in ("0", "1"):
        plan = plan.model_copy(update={"cache_cleared": os.environ["MLPERF_CACHE_CLEARED"] == "1"})
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", 0)))
    world = int(os.environ.get("WORLD_SIZE", os.environ.get("SLURM_NTASKS", 1)))
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", 0)))
    torch.set_num_threads(plan.threads_per_process)
    device = "cpu"
    if plan.device == "cuda":
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    if init_process_group:
        import torch.distributed as dist

        backend = "nccl" if plan.device == "cuda" else "gloo"
        if world == 1 and "MASTER_PORT" not in os.environ:  # one process, not under torchrun
            init_one_process_group(backend)
        else:
            dist.init_process_group(backend, rank=rank, world_size=world)
    rt = Runtime(
        plan=plan,
        rank=rank,
        world_size=world,
        local_rank=local_rank,
        device=device,
        log=MLLog(plan.log_path if rank == 0 else None, rank),
        cfg=cfg,
    )

    if init_process_group:  # ranks.json: which host each rank runs on (harness/train/placement.py)
        from harness.train import placement

        placement.record(rt)

    if plan.resume_from:  # `mlperf run --resume`: continue the log, no second prologue
        rt.log.resume(resume_marker(plan.run_dir))

    def _on_signal(signum, _frame):
        rt.stop_requested = True
        rt.signal_received = signum

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    return rt
