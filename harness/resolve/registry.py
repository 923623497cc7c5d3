"""The benchmark specs by official name: what `mlperf` runs for each benchmark.

    spec("gpt3").module        -> "reference_impls.gpt3"   (python -m ... --plan plan.json)
    spec("rgat").is_prepared(plan)                          (aliases resolve through benchmarks.get)

A plain dict, no entry-point scanning. Importing it never imports torch (the specs are torch-free;
tests/unit/test_layers.py holds that).
"""

from __future__ import annotations

import benchmarks
from harness.core.spec import BenchmarkSpec
from reference_impls.gnn.spec import SPEC as GNN
from reference_impls.gpt3.spec import SPEC as GPT3
from reference_impls.llama2_70b_lora.spec import SPEC as LLAMA2_70B_LORA
from reference_impls.stable_diffusion.spec import SPEC as STABLE_DIFFUSION

SPECS: dict[str, BenchmarkSpec] = {s.name: s for s in (GPT3, LLAMA2_70B_LORA, GNN, STABLE_DIFFUSION)}


def spec(name: str) -> BenchmarkSpec:
    """The spec of a benchmark by official name or alias (unknown names: one-line ConfigError)."""
    return SPECS[benchmarks.get(name).name]
