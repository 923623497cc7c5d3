"""gpt-oss-20b pretraining on megatron-core (C4; tiny: a synthetic corpus) as one Benchmark object.
Training code: the Megatron-GPT family, reference_impls/megatron_gpt/ (its model provider
megatron_gpt/gpt_oss.py: megatron-core's MoE layers); process entry reference_impls/gpt_oss_20b/
(named here lazily: importing this never imports torch)."""

from __future__ import annotations

from benchmarks.benchmark import Benchmark
from benchmarks.gpt_oss_20b.config import GptOssConfig
from benchmarks.gpt_oss_20b.cost import COST
from harness.core.benchmark import implementation
from harness.core.data_manifest import DataManifest

_IMPL = "reference_impls.gpt_oss_20b"
_FAMILY = "reference_impls.megatron_gpt"

# As llama31_8b's: the full data (C4 shards, the Llama 3.1 tokenizer) is the user's; the tiny
# corpus depends on these (pretraining from scratch: no checkpoint).
DATA = DataManifest(fields=(), tiny_fields=("max_sequence_length", "vocab_size", "eval_samples"))

BENCHMARK = Benchmark.here(
    __file__,
    GptOssConfig,
    COST,
    implementation(_IMPL, DATA, lr_find="lr_find:lr_find", power_extension=True, family=_FAMILY),
)
