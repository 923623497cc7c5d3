"""Llama 2 70B LoRA fine-tuning on GovReport (transformers + peft, FSDP2) as one Benchmark object.
Training code: reference_impls/llama2_70b_lora/ (named here lazily: importing this never imports torch)."""

from __future__ import annotations

from benchmarks.benchmark import Benchmark
from benchmarks.llama2_70b_lora.config import Llama2LoraConfig
from benchmarks.llama2_70b_lora.cost import COST
from harness.core.benchmark import implementation
from harness.core.data_manifest import DataManifest

_IMPL = "reference_impls.llama2_70b_lora"

# Full: the dataset and base checkpoint folders; tiny: the generated data and the tiny base
# checkpoint pretrained on it depend on the model's shape and the generator's knobs.
# fmt: off
DATA = DataManifest(fields=("dataset_dir", "model_dir"), tiny_fields=(
    "vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_attention_heads",
    "num_key_value_heads", "max_sequence_length", "rope_theta", "rms_norm_eps", "train_samples",
    "eval_samples", "tiny_pretrain_steps", "tiny_num_topics", "tiny_summary_length", "tiny_summary_noise",
))
# fmt: on

BENCHMARK = Benchmark.here(
    __file__, Llama2LoraConfig, COST, implementation(_IMPL, DATA, lr_find="lr_find:lr_find")
)
