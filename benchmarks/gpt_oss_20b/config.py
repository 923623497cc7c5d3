"""Typed gpt-oss-20b pretraining config (MLPerf Training v6.0-v6.1, `gpt_oss_20b`). Defaults are the
reference's model (mlcommons/training small_llm_moe_pretraining/primus/): 24 layers, hidden 2880,
64 query / 8 KV heads of width 64, 32 experts top-4 with a softmax router, no shared expert, no aux
loss, a 128-token sliding window on alternating layers, RoPE base 150000, the Llama 3.1 tokenizer.
NVIDIA's variant (the original gpt-oss: attention sinks, linear biases) is `attention_sinks` and
`add_bias_linear`; its clamped GLU and YaRN have no field (the reference uses neither).

Closed-rule arithmetic (closed_gpt_oss_20b.yaml, 6.0.0 and 6.1.0; the same as llama31_8b's):
    max_steps     = 1,200,000 (the LR schedule's length, logged)
    decay steps   = max_steps - warmup steps       e.g. warmup 128 -> 1,199,872
    warmup steps  = ceil(opt_learning_rate_warmup_samples / GBS)   tunable (RCPs: 2,048 at GBS 16,
                    4,096 at 32, 12,288 at 64)     e.g. 4,096 at GBS 32 -> 128 steps
    end LR        = 0.1 x base LR
    eval interval = ceil(12288 / GBS) steps on 1,024 validation sequences (the RCPs converge at
                    multiples of 12,288 sequences)
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from benchmarks.megatron_gpt import derive_schedule
from benchmarks.megatron_moe import MegatronMoeConfig


class GptOssConfig(MegatronMoeConfig):
    # ---- model: gpt-oss-20b as the reference builds it ------------------------------------------
    num_layers: int = Field(24, ge=1)
    """Transformer layers, each with a MoE block."""
    hidden_size: int = Field(2880, ge=8)
    """Model width d."""
    num_attention_heads: int = Field(64, ge=1)
    """Query heads (width kv_channels = 64: 64 x 64 = 4,096 != hidden)."""
    num_query_groups: int = Field(8, ge=1)
    """Key/value heads (grouped-query attention: 8 query heads share one)."""
    kv_channels: int | None = Field(64, ge=1)
    """Head width."""
    ffn_hidden_size: int = Field(2880, ge=8)
    """Dense MLP width (unused: every layer is MoE; kept equal to the experts' width)."""
    moe_ffn_hidden_size: int = Field(2880, ge=1)
    """Each expert's SwiGLU width."""
    num_moe_experts: int = Field(32, ge=1)
    """Routed experts per layer."""
    moe_router_topk: int = Field(4, ge=1)
    """Experts per token."""
    max_sequence_length: int = Field(8192, ge=8)
    """Tokens per sequence (logged; 8192 in the closed division)."""
    vocab_size: int = Field(128256, ge=8)
    """Vocabulary of the Llama 3.1 tokenizer the reference uses (the original gpt-oss: 201,088)."""
    rotary_base: int = Field(150000, ge=1)
    """RoPE base frequency theta."""
    window_size: int = Field(128, ge=0)
    """Sliding window of the windowed layers, in tokens."""
    window_attn_skip_freq: int = Field(2, ge=1)
    """Windowed and full-attention layers alternate."""
    norm_epsilon: float = Field(1.0e-5, gt=0.0)
    """RMSNorm epsilon."""

    # ---- DeepSeek-V3's, which gpt-oss has not (the provider builds none of them) -----------------
    multi_latent_attention: Literal[False] = False
    """gpt-oss attends with grouped-query attention; multi-latent attention is deepseekv3_671b's."""
    q_lora_rank: Literal[0] = 0
    """No multi-latent attention here (deepseekv3_671b's field)."""
    kv_lora_rank: Literal[0] = 0
    """No multi-latent attention here (deepseekv3_671b's field)."""
    qk_head_dim: Literal[0] = 0
    """No multi-latent attention here (deepseekv3_671b's field)."""
    qk_pos_emb_head_dim: Literal[0] = 0
    """No multi-latent attention here (deepseekv3_671b's field)."""
    v_head_dim: Literal[0] = 0
    """No multi-latent attention here (deepseekv3_671b's field)."""
    mtp_num_layers: Literal[0] = 0
    """No multi-token prediction in gpt-oss (deepseekv3_671b's field)."""
    pipeline_split_counts_embedding_and_loss: Literal[False] = False
    """Pipeline stages split the transformer layers alone (24 layers divide every PP it uses)."""

    # ---- optimizer and schedule (log keys) ------------------------------------------------------
    opt_base_learning_rate: float = Field(8.0e-4, ge=0.0)
    """Peak LR (RCPs: 4e-4 at GBS 16, 8e-4 at 32, 1e-3 at 64)."""
    opt_learning_rate_warmup_samples: int = Field(4096, ge=0)
    """Warmup in sequences (the RCPs' unit); warmup steps = ceil(this / GBS) unless set."""

    # ---- data, evaluation, stopping -------------------------------------------------------------
    eval_interval_samples: int = Field(12288, ge=1)
    """Evaluate every ceil(eval_interval_samples / GBS) steps."""
    eval_samples: int = Field(1024, ge=1)
    """Logged `eval_samples`: validation sequences per evaluation (closed: 1,024)."""
    train_samples_cap: int = Field(10_000_000, ge=1)
    """Stop (aborted) after this many training sequences (the RCPs converge at 184,320-331,776)."""

    MODEL_PROVIDER: ClassVar[str] = "reference_impls.megatron_gpt.gpt_oss"

    @model_validator(mode="after")
    def _derive(self):
        derive_schedule(self, math.ceil(self.opt_learning_rate_warmup_samples / self.global_batch_size))
        self._check_moe()
        return self
