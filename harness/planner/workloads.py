"""A benchmark's Workload (benchmarks/costs.py): the facts its cost model derives from its typed
config (full size by default, or the resolved config of the run being priced), and the samples it
takes to converge (RCPs at full size, data/tiny.yaml or the user's calibration at tiny size).
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import TYPE_CHECKING

from benchmarks.costs import Recompute, Workload
from harness.core.errors import ConfigError
from harness.planner import rcp
from harness.planner.hardware import load_data
from harness.planner.params import cost

if TYPE_CHECKING:
    from benchmarks.benchmark import Benchmark

__all__ = ["Recompute", "Workload", "get", "samples_to_converge", "tiny_table"]


@cache
def tiny_table() -> dict:
    return load_data("tiny.yaml")


@cache
def _default(bench: Benchmark) -> Workload:
    return _build(bench, bench.default_config(), "full")


def get(bench: Benchmark, cfg=None, size: str = "full") -> Workload:
    """The workload of `bench` at its full reference size, or of a resolved config. ConfigError
    (one line) for a benchmark without a cost model."""
    cost(bench)
    return _default(bench) if cfg is None else _build(bench, cfg, size)


def _build(bench: Benchmark, cfg, size: str) -> Workload:
    w = cost(bench).workload(cfg, size)
    fields = type(cfg).model_fields  # read once: the time model asks for them per candidate
    return replace(
        w,
        bench=bench,
        sequence_parallel=bool(getattr(cfg, "sequence_parallel", False))
        if "sequence_parallel" in fields
        else False,
        eval_mbs=getattr(cfg, "eval_micro_batch_size", None) if "eval_micro_batch_size" in fields else None,
    )


def samples_to_converge(w: Workload, gbs: int, ruleset: str = "4.0.0", tiny: dict | None = None) -> float:
    """Samples to reach the target at `gbs`: the RCP mean at full size (harness.planner.rcp), else
    the tiny calibration (`tiny`: the user's, else data/tiny.yaml)."""
    if w.size == "full":
        return rcp.samples_to_converge(w.bench, gbs, ruleset)
    row = (tiny or {}).get(w.name) or tiny_table().get(w.name)
    if row is None:
        raise ConfigError(
            f"no tiny samples to converge for {w.name} (harness/planner/data/tiny.yaml); "
            f"`mlperf plan {w.name} --system SYSTEM --calibrate RUN_DIR` records them"
        )
    return float(row["samples"])
