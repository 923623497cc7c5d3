"""Llama 3.1 8B pretraining on megatron-core (C4; tiny: a synthetic corpus) as one Benchmark object.
Training code: the Megatron-GPT family, reference_impls/megatron_gpt/ (its model provider
megatron_gpt/llama31.py); process entry reference_impls/llama31_8b/ (named here lazily: importing
this never imports torch)."""

from __future__ import annotations

from benchmarks.benchmark import Benchmark
from benchmarks.llama31_8b.config import Llama31Config
from benchmarks.llama31_8b.cost import COST
from harness.core.benchmark import implementation
from harness.core.data_manifest import DataManifest

_IMPL = "reference_impls.llama31_8b"
_FAMILY = "reference_impls.megatron_gpt"

# The full data (C4 shards and the Llama 3.1 tokenizer) is the user's; the tiny corpus depends on
# these (pretraining from scratch: no checkpoint, so the model's shape is not among them).
DATA = DataManifest(fields=(), tiny_fields=("max_sequence_length", "vocab_size", "eval_samples"))

# train.py trains on after run_stop while rt.more_power_readings() (MLPerf Power's 60 readings)
BENCHMARK = Benchmark.here(
    __file__,
    Llama31Config,
    COST,
    implementation(_IMPL, DATA, lr_find="lr_find:lr_find", power_extension=True, family=_FAMILY),
)
