"""Parameter counts and per-rank bytes of a benchmark's model, from its cost model
(benchmarks/<name>/cost.py: exactly as the harness's own implementation builds and shards it).

    parameters(bench, cfg)                    -> {"total": N, "trainable": T, ...}
    rank_bytes(bench, cfg, layout, device)    -> bytes per rank by part (the busiest rank)

`cost(bench)` is the one place the planner reaches a benchmark's cost model: a benchmark without
one is one line (ConfigError, exit 2), never another benchmark's numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.core.errors import ConfigError

if TYPE_CHECKING:
    from benchmarks.benchmark import Benchmark
    from benchmarks.costs import CostModel


def cost(bench: Benchmark) -> CostModel:
    """The benchmark's cost model; ConfigError (one line) when it has none."""
    if bench.cost is None:
        raise ConfigError(f"the planner has no cost model for {bench.name}")
    return bench.cost


def parameters(bench: Benchmark, cfg: Any = None) -> dict:
    """{'total': all parameters, 'trainable': those with gradients} of the model `cfg` builds
    (default: the benchmark's full-size config)."""
    model = cost(bench)
    return model.parameters(cfg if cfg is not None else bench.default_config())


def rank_bytes(bench: Benchmark, cfg: Any = None, layout: Any = None, device: str = "cuda") -> dict:
    """Bytes per rank of the busiest rank by part: 'weights', 'gradients', 'optimizer' (and what
    else the implementation holds, e.g. gathered shards), plus 'parameters_rank' (a count, not
    bytes). `cfg` is the benchmark's typed config (default: full size), `layout` anything with
    tp/pp/vp/cp/dp (a harness Layout, a dict; missing degrees are 1), `device` 'cuda' or 'cpu'
    (dtypes differ)."""
    model = cost(bench)
    return model.rank_bytes(cfg if cfg is not None else bench.default_config(), layout, device)
