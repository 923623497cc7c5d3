"""GPT-3 175B pretraining on megatron-core (C4; tiny: a synthetic corpus) as one Benchmark object.
Training code: the Megatron-GPT family, reference_impls/megatron_gpt/ (its model provider
megatron_gpt/gpt3.py); process entry reference_impls/gpt3/ (named here lazily: importing this never
imports torch)."""

from __future__ import annotations

from benchmarks.benchmark import Benchmark
from benchmarks.gpt3.config import Gpt3Config
from benchmarks.gpt3.cost import COST
from harness.core.benchmark import implementation
from harness.core.data_manifest import DataManifest

_IMPL = "reference_impls.gpt3"
_FAMILY = "reference_impls.megatron_gpt"

# The full data (C4 + the reference checkpoint) is the user's, whatever the config; the tiny corpus
# and checkpoint depend on these. The run's GBS, base LR and seed don't: the checkpoint is
# pretrained at the reference GBS with prepare.PRETRAIN_LR.
# fmt: off
DATA = DataManifest(fields=(), tiny_fields=(
    "max_sequence_length", "vocab_size", "make_vocab_size_divisible_by", "eval_samples", "num_layers",
    "hidden_size", "num_attention_heads", "ffn_hidden_size", "init_method_std", "dropout",
    "opt_adam_beta_1", "opt_adam_beta_2", "opt_adam_epsilon", "opt_weight_decay", "opt_gradient_clip_norm",
    "reference_global_batch_size", "reference_warmup_steps", "reference_decay_steps",
    "reference_checkpoint_step",
))
# fmt: on

# train.py trains on after run_stop while rt.more_power_readings() (MLPerf Power's 60 readings)
BENCHMARK = Benchmark.here(
    __file__,
    Gpt3Config,
    COST,
    implementation(_IMPL, DATA, lr_find="lr_find:lr_find", power_extension=True, family=_FAMILY),
)
