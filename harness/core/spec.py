"""`BenchmarkSpec`: everything the harness needs from one reference implementation, as one typed
object (in the spirit of torchtitan's `TrainSpec`). Each `reference_impls/<name>/spec.py` defines
`SPEC`; `harness/resolve/registry.py` holds them by official benchmark name.

The spec is read by the CLI, which never imports torch: `config` and `is_prepared` are torch-free,
and `run`/`prepare`/`lr_find` import the training code only when a rank calls them.

    python -m reference_impls.gpt3 --plan plan.json     # every rank: harness.train.entry.run(SPEC)
                                                        # dispatches on plan.task:
        "train"    -> SPEC.run(rt)          True/False (target reached), or (reached, run_stop metadata)
        "prepare"  -> SPEC.prepare(plan)     tiny: generate data; full: validate the dataset
        "lr_find"  -> SPEC.lr_find(rt)      the LR range test's sweep (benchmarks that have one)
        "build"    -> SPEC.build(cfg, layout, device)   `mlperf run --dry-run --build`: each distinct
                                    rank shard built on the meta device; a JSON-able report
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str
    """Official `submission_benchmark` name (the registry key)."""
    module: str
    """The package run as `python -m MODULE --plan plan.json` in every rank and data-prep process."""
    config: type
    """The typed config class (a `benchmarks.base.BenchmarkConfig`; pydantic, torch-free)."""
    run: Callable[[Any], Any]
    """Train one run in this rank: `run(rt)` -> reached, or (reached, run_stop metadata)."""
    prepare: Callable[[Any], Any]
    """`prepare(plan)`: generate tiny data / validate a full dataset (raises ConfigError)."""
    is_prepared: Callable[[Any], bool]
    """Torch-free and cheap: is `plan.data_dir` ready (so `mlperf run` prepares on demand only)?"""
    lr_find: Callable[[Any], Any] | None = None
    """`lr_find(rt)`: the LR range test's sweep in this rank; None where the benchmark has none."""
    build: Callable[[Any, Any, str], dict] | None = None
    """`build(cfg, layout, device)`: build each distinct rank shard of the layout as the config sets
    it (meta device; fake process group) and return the report `mlperf run --dry-run --build`
    renders: parameters_total/_trainable, shards [{name, ranks, parameters, weights, gradients,
    optimizer}], busiest (index), not_built and built (one line each)."""
    power_extension: bool = False
    """True where `run` honours MLPerf Power's minimum: after run_stop it keeps its training loop
    going, same code and markers, while `rt.more_power_readings()` says a node has fewer than 60
    readings. Without it a power run ends at run_stop, and a run shorter than the minimum is
    claimed without energy (harness/run/power/files.py says so in one line)."""
