"""DeepSeek-V3 671B pretraining on megatron-core (C4; tiny: a synthetic corpus) as one Benchmark object.
Training code: the Megatron-GPT family, reference_impls/megatron_gpt/ (its model provider
megatron_gpt/deepseek.py: MLA, MoE, MTP); process entry reference_impls/deepseekv3_671b/
(named here lazily: importing this never imports torch)."""

from __future__ import annotations

from benchmarks.benchmark import Benchmark
from benchmarks.deepseekv3_671b.config import DeepseekV3Config
from benchmarks.deepseekv3_671b.cost import COST
from harness.core.benchmark import implementation
from harness.core.data_manifest import DataManifest

_IMPL = "reference_impls.deepseekv3_671b"
_FAMILY = "reference_impls.megatron_gpt"

# The full data (C4, the Llama 3.1 tokenizer, the converted checkpoint) is the user's; the tiny
# corpus and starting checkpoint depend on these: the model's shape and init, and the pretraining
# (tiny_start_steps at the run's GBS and schedule, prepare.WEIGHTS_PRETRAIN_LR). Not the run's
# base LR (an LR sweep reuses the prepared start), layout or switches.
# fmt: off
DATA = DataManifest(fields=(), tiny_fields=(
    "max_sequence_length", "vocab_size", "make_vocab_size_divisible_by", "eval_samples", "num_layers",
    "hidden_size", "num_attention_heads", "ffn_hidden_size", "init_method_std", "dropout", "rotary_base",
    "norm_epsilon", "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim",
    "num_moe_experts", "moe_router_topk", "moe_ffn_hidden_size", "moe_router_score_function",
    "moe_router_enable_expert_bias", "moe_router_num_groups", "moe_router_group_topk",
    "moe_shared_expert_intermediate_size", "moe_first_dense_layers", "moe_aux_loss_coeff", "mtp_num_layers",
    "opt_adamw_beta_1", "opt_adamw_beta_2", "opt_adamw_epsilon", "opt_adamw_weight_decay",
    "opt_gradient_clip_norm", "global_batch_size", "max_steps", "tiny_start_steps",
))
# fmt: on

BENCHMARK = Benchmark.here(
    __file__,
    DeepseekV3Config,
    COST,
    implementation(_IMPL, DATA, lr_find="lr_find:lr_find", power_extension=True, family=_FAMILY),
)
