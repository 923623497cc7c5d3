"""The benchmark registry: one `Benchmark` object per benchmark (benchmarks/benchmark.py), by name.

    bench = benchmarks.get("rgat")        # by name or alias; an unknown name is one-line ConfigError
    bench.rules, bench.config, bench.cost, bench.impl

Each benchmark's folder has the same shape:
    __init__.py         BENCHMARK = Benchmark(...): the object (config class, cost model, implementation)
    benchmark.yaml      rules side: what the installed mlperf-logging does not hold (targets, aliases, ...)
    config.py           the typed config (pydantic; never imports torch)
    cost.py             the planner's cost model (torch-free)
    configs/tiny.yaml   tiny-size preset (any system); configs/<system>.yaml: tuned for one system
Training code lives in `reference_impls/<name>/`, named by the object's lazy references only, so
this registry never imports torch. A plain dict, no entry-point scanning: a benchmark is added by
its folder and one line in BUILTIN; tests add theirs with `register` (or inside `scratch()`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks.base import BenchmarkConfig, BenchmarkDef  # noqa: F401  (re-exported)
from benchmarks.benchmark import Benchmark
from harness.core.errors import ConfigError, suggest

ROOT = Path(__file__).resolve().parent

BUILTIN = (
    "gpt3",
    "llama2_70b_lora",
    "gnn",
    "stable_diffusion",
    "llama31_8b",
    "flux1",
    "gpt_oss_20b",
    "deepseekv3_671b",
)
"""The packages benchmarks/<name>/ whose BENCHMARK the registry holds, in the order listed."""

_registry: dict[str, Benchmark] | None = None


def _table() -> dict[str, Benchmark]:
    global _registry
    if _registry is None:
        _registry = {}
        for pkg in BUILTIN:
            b = importlib.import_module(f"benchmarks.{pkg}").BENCHMARK
            _registry[b.name] = b
    return _registry


def register(bench: Benchmark) -> Benchmark:
    """Add a benchmark (a test's toy, an out-of-tree benchmark); a taken name is an error."""
    table = _table()
    if bench.name in table and table[bench.name] is not bench:
        raise ConfigError(f"benchmark '{bench.name}' is registered already")
    table[bench.name] = bench
    return bench


@contextmanager
def scratch() -> Iterator[dict[str, Benchmark]]:
    """A scratch registry for a test: what is registered inside is gone afterwards."""
    global _registry
    saved = dict(_table())
    try:
        yield _table()
    finally:
        _registry = saved


def available() -> list[str]:
    """The registered benchmarks' names."""
    return list(_table())


def registered() -> list[Benchmark]:
    """The registered benchmarks themselves, in `available()`'s order."""
    return list(_table().values())


def runs() -> list[str]:
    """The names of the registered benchmarks the harness runs (those with an implementation)."""
    return [b.name for b in _table().values() if b.impl is not None]


def aliases() -> dict[str, str]:
    """Every spelling `get` accepts (name and benchmark.yaml aliases, lower case) -> name."""
    out: dict[str, str] = {}
    for b in registered():
        out[b.name] = b.name
        for a in b.rules.aliases:
            out.setdefault(a.lower(), b.name)
    return out


def get(name: str) -> Benchmark:
    """The benchmark by name or alias (`rgat`, `sd`, `llama2-lora`, ...). A name the installed
    mlperf-logging lists but the harness does not run, and a name nothing knows, are each one
    line (ConfigError, exit 2) saying so."""
    table = aliases()
    key = str(name).strip().lower()
    if key in table:
        return _table()[table[key]]
    raise ConfigError(not_run(name) or unknown(name, table))


def not_run(name: str) -> str | None:
    """The line for a benchmark mlperf-logging knows and the harness does not run, else None."""
    from harness.core.rulesets import all_benchmarks, rulesets_of

    key = str(name).strip().lower()
    if key not in all_benchmarks():
        return None
    listed = rulesets_of(key)
    by = f"ruleset{'s' if len(listed) > 1 else ''} {', '.join(listed)}"
    return (
        f"the harness does not run '{key}' (listed by {by}): `mlperf check` and `mlperf results` "
        f"read its logs; it runs {', '.join(runs())}"
    )


def unknown(name: str, table: dict[str, str]) -> str:
    key = str(name).strip().lower()
    return f"unknown benchmark '{name}'{suggest(key, table, table)}; known: {', '.join(available())}"
