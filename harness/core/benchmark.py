"""The implementation half of a benchmark, as the harness sees it (torch-free).

A benchmark is one object, `benchmarks.benchmark.Benchmark`: its rules, typed config, configs,
cost model and this `Implementation`. The implementation's callables are `Lazy` references
("pkg.module:attr"), so holding a benchmark never imports its training code (torch): the CLI,
the planner and the reviewer read the registry; only a rank or a data-preparation process
calls `train`, `prepare`, `lr_find` or `build`.

    python -m reference_impls.gpt3 --plan plan.json     # every rank: harness.train.entry.run(BENCHMARK)
        task "train"    -> impl.train(rt) -> RunOutcome      (rt: harness.train.runtime.Runtime[C])
        task "prepare"  -> impl.prepare(plan)                tiny: generate; full: validate (ConfigError)
        task "lr_find"  -> impl.lr_find(rt)                  the LR range test's sweep, where there is one
        task "build"    -> impl.build(cfg, layout, device)   `mlperf run --dry-run --build` report
(torchtitan's ModelSpec does the same for its models: one spec of plain callables per model.)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from harness.core.data_manifest import DataManifest


class Lazy:
    """A callable named by "package.module:attribute", imported at its first call (or `resolve`).

    Why not the function itself: importing a training module imports torch (seconds), and every
    `mlperf` command reads the registry. tests/unit/test_benchmark_registry.py resolves every
    target of every registered benchmark, so a renamed function fails there, not in a rank."""

    def __init__(self, target: str):
        module, sep, attr = target.partition(":")
        if not (module and sep and attr):
            raise ValueError(f"lazy target {target!r}: expected 'package.module:attribute'")
        self.target = target
        self._fn: Callable[..., Any] | None = None

    def resolve(self) -> Callable[..., Any]:
        if self._fn is None:
            module, _, attr = self.target.partition(":")
            obj: Any = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
            self._fn = obj
        return self._fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"lazy({self.target!r})"


def lazy(target: str) -> Lazy:
    return Lazy(target)


@dataclass(frozen=True)
class RunOutcome:
    """What one run's training returns in every rank (harness/train/entry.py turns it into the
    exit code and run_stop)."""

    reached: bool
    """The quality target was reached (run_stop status=success)."""
    metadata: dict[str, Any] | None = None
    """Extra run_stop metadata (e.g. the gpt3 power extension's last eval), or None."""


@dataclass(frozen=True)
class Implementation[C: BaseModel]:
    """The harness's reference implementation of one benchmark; a benchmark without one is
    reviewed and scored (`mlperf check`, `mlperf results`) but not run."""

    module: str
    """The package every rank and data-preparation process runs: `python -m MODULE --plan plan.json`."""
    train: Lazy
    """`(rt: Runtime[C]) -> RunOutcome`: one run in this rank."""
    prepare: Lazy
    """`(plan: RunPlan) -> None`: tiny: generate deterministic data and write `data`'s manifest;
    full: validate the dataset (ConfigError naming the missing file and where it comes from)."""
    data: DataManifest
    """What a prepared data folder records (PREPARED.json) and how `mlperf run` checks it, torch-free."""
    build: Lazy | None = None
    """`(cfg: C, layout: Layout, device: str) -> dict`: build each distinct rank shard on the meta
    device; the report `mlperf run --dry-run --build` renders (None: the benchmark has no build)."""
    lr_find: Lazy | None = None
    """`(rt: Runtime[C]) -> None`: the LR range test's sweep in this rank; None where there is none."""
    power_extension: bool = False
    """True where `train` honours MLPerf Power's minimum: after run_stop it keeps its loop going
    while `rt.more_power_readings()` says a node has fewer than 60 readings. Without it a power
    run ends at run_stop and a run shorter than the minimum is claimed without energy."""

    def targets(self) -> dict[str, Lazy]:
        """The lazy callables it names, by field (the registry test resolves each)."""
        out = {"train": self.train, "prepare": self.prepare, "build": self.build, "lr_find": self.lr_find}
        return {k: v for k, v in out.items() if v is not None}


def implementation(
    package: str,
    data: DataManifest,
    *,
    prepare: str = "prepare:prepare",
    build: str | None = "shapes:build_report",
    lr_find: str | None = None,
    power_extension: bool = False,
    family: str | None = None,
) -> Implementation:
    """An Implementation laid out as the reference implementations are: `package/__main__.py` the
    process entry, `package.train:run` the loop, `prepare`, `build` and `lr_find` given relative
    to the package ("module:function"). `family`: the package whose loop, prepare, build and
    lr_find serve several benchmarks (reference_impls/megatron_gpt for gpt3 and the current
    round's Megatron-GPT pretraining); `package` is then this benchmark's process entry only."""
    code = family or package
    return Implementation(
        module=package,
        train=lazy(f"{code}.train:run"),
        prepare=lazy(f"{code}.{prepare}"),
        data=data,
        build=lazy(f"{code}.{build}") if build else None,
        lr_find=lazy(f"{code}.{lr_find}") if lr_find else None,
        power_extension=power_extension,
    )


class RankBenchmark[C: BaseModel](Protocol):
    """What a rank process needs of its benchmark (harness/train/entry.py): the registry's
    `benchmarks.benchmark.Benchmark` is one; `train` (below `benchmarks`) names only this."""

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> type[C]: ...

    @property
    def impl(self) -> Implementation[C] | None: ...
