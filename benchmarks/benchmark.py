"""`Benchmark`: everything the harness knows of one benchmark, as one object.

    rules       benchmarks/<name>/benchmark.yaml (what the installed mlperf-logging does not hold)
    config      the typed config class (benchmarks/<name>/config.py; pydantic, torch-free)
    configs_dir benchmarks/<name>/configs/ (tiny.yaml and one YAML per tuned system)
    cost        the planner's cost model (benchmarks/<name>/cost.py), or None: not planned
    impl        the reference implementation (harness/core/benchmark.py: lazy callables), or None:
                the harness reviews and scores the benchmark but does not run it

Each `benchmarks/<name>/__init__.py` builds its `BENCHMARK`; `benchmarks/__init__.py` holds them in
one registry, resolved once at the CLI boundary (`benchmarks.get`), and the object travels down.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from benchmarks.base import BenchmarkConfig, BenchmarkDef
from benchmarks.costs import CostModel
from harness.core.benchmark import Implementation
from harness.core.errors import ConfigError
from harness.core.schema import load_yaml, validate


@dataclass(frozen=True)
class Benchmark[C: BenchmarkConfig]:
    name: str
    """Registry name: the `mlperf run NAME` spelling, `RunPlan.benchmark`, results/runs/<name>/."""
    config: type[C]
    """The typed config class."""
    folder: Path
    """benchmarks/<name>/: benchmark.yaml and configs/."""
    cost: CostModel | None = None
    """The planner's cost model, or None: `mlperf plan` says it has none."""
    impl: Implementation[C] | None = None
    """The reference implementation, or None: reviewed and scored, not run."""
    modality: str = "text"
    """What one sample is ("text", "image", "graph"): how the planner and reports name a sample."""

    @cached_property
    def rules(self) -> BenchmarkDef:
        """benchmark.yaml, validated once. Its `name` is the official name the rules and
        mlperf-logging know (the registry name but for a stand-in such as the tests' toy)."""
        path = self.folder / "benchmark.yaml"
        d = validate(BenchmarkDef, load_yaml(path), str(path))
        if d.name != self.folder.name:
            raise ConfigError(f"{path}: name '{d.name}' does not match its folder '{self.folder.name}'")
        return d

    @property
    def official(self) -> str:
        """The name the rules, the rulesets and the logs use (`rules.name`)."""
        return self.rules.name

    @property
    def configs_dir(self) -> Path:
        return self.folder / "configs"

    @classmethod
    def here(cls, init_file: str, config: type[C], cost: CostModel, impl: Implementation[C], **kw: Any):
        """The benchmark whose folder holds `init_file` (its __init__.py), named after the folder."""
        folder = Path(init_file).resolve().parent
        return cls(name=folder.name, config=config, folder=folder, cost=cost, impl=impl, **kw)

    def typed(self, config: dict[str, Any]) -> C:
        """A resolved config (a RunPlan's `config`) as this benchmark's typed class."""
        return self.config.model_validate(config)

    def default_config(self) -> C:
        """The typed config at its defaults (the full-size reference; shapes only: fields without
        a default, such as a global batch, stay unset)."""
        # pyrefly: ignore[missing-argument]  (fields without a default stay unset: model_construct's point)
        return self.config.model_construct()
