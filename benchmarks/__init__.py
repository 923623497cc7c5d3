"""The benchmark registry: a plain dict from the official `submission_benchmark` name to its folder.

Each folder has the same shape:
    benchmark.yaml      rules side: target(s), runs per result, fixed/tunable hyperparameters
    config.py           the typed config (pydantic; never imports torch)
    configs/tiny.yaml   tiny-size preset (any system)
    configs/<system>.yaml  settings tuned for one system (opens with the command that uses it)
Tiny-size compliance rules are derived per ruleset from the package's own files with the
benchmark's `tiny_rules:` replacements (benchmarks/tiny_rules.py).
Training code lives in `reference_impls/<name>/`, which exposes it as one typed spec
(`reference_impls/<name>/spec.py`, held by `harness/resolve/registry.py`).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from benchmarks.base import BenchmarkConfig, BenchmarkDef
from harness.core.errors import ConfigError, suggest
from harness.core.schema import load_yaml, validate

ROOT = Path(__file__).resolve().parent

REGISTRY: dict[str, str] = {
    "gpt3": "gpt3",
    "llama2_70b_lora": "llama2_70b_lora",
    "gnn": "gnn",
    "stable_diffusion": "stable_diffusion",
}


def folder(name: str) -> Path:
    return ROOT / REGISTRY[name]


@cache
def _load(name: str) -> BenchmarkDef:
    path = folder(name) / "benchmark.yaml"
    d = validate(BenchmarkDef, load_yaml(path), str(path))
    if d.name != name:
        raise ConfigError(f"{path}: name '{d.name}' does not match its registry entry '{name}'")
    return d


def available() -> list[str]:
    """Registered benchmarks whose definition exists (a benchmark lands with its folder)."""
    return [n for n in REGISTRY if (folder(n) / "benchmark.yaml").exists()]


def aliases() -> dict[str, str]:
    out = {}
    for n in available():
        out[n] = n
        for a in _load(n).aliases:
            out[a] = n
    return out


def get(name: str) -> BenchmarkDef:
    """Definition by official name or alias (`rgat`, `sd`, `llama2-lora`, ...)."""
    table = aliases()
    key = name.strip().lower()
    if key not in table:
        raise ConfigError(f"unknown benchmark '{name}'{suggest(key, table)}; known: {', '.join(available())}")
    return _load(table[key])


def config_class(name: str) -> type[BenchmarkConfig]:
    """The typed config of a benchmark (pydantic, torch-free), by official name or alias."""
    from benchmarks.gnn.config import GnnConfig
    from benchmarks.gpt3.config import Gpt3Config
    from benchmarks.llama2_70b_lora.config import Llama2LoraConfig
    from benchmarks.stable_diffusion.config import StableDiffusionConfig

    classes = {
        "gpt3": Gpt3Config,
        "llama2_70b_lora": Llama2LoraConfig,
        "gnn": GnnConfig,
        "stable_diffusion": StableDiffusionConfig,
    }
    return classes[get(name).name]


def typed_config(plan) -> BenchmarkConfig:
    """A RunPlan's resolved config as its typed class (outside a rank; ranks have `rt.cfg`)."""
    return config_class(plan.benchmark).model_validate(plan.config)
