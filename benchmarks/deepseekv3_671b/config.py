"""Typed DeepSeek-V3 671B pretraining config (MLPerf Training v6.0-v6.1, `deepseekv3_671b`). Defaults
are the model of the reference (mlcommons/training llm_moe_pretraining/nemo/, Megatron-Bridge): 61
layers (3 dense, 58 MoE), hidden 7168, multi-latent attention (128 heads, q_lora 1536, kv_lora 512,
qk 128 + rope 64, v 128), 256 routed experts of width 2048 top-8 + 1 shared expert, a sigmoid router
with expert bias and group-limited routing (8 groups, top 4), one MTP layer. The run starts from a
checkpoint's weights with a fresh optimizer and schedule (FROM_CHECKPOINT, START_WEIGHTS_ONLY).

Closed-rule arithmetic (closed_deepseekv3_671b.yaml; 6.1.0 adds the first eval's count):
    GBS           >= 15,360 sequences of 4,096 tokens
    base LR       = 2.4e-5 x sqrt(GBS / 16384)       e.g. GBS 15360 -> 2.3238e-5, 16384 -> 2.4e-5
    warmup steps  = 4;  decay steps = 12,000 - warmup = 11,996 (max_steps 12,000: the schedule)
    first eval    = GBS x floor(42 + 24576 / GBS) sequences (6.1.0)
                                                      e.g. GBS 16384 -> 43 steps = 704,512
    then          every ceil(eval_interval_samples / GBS) steps (default every step: the RCPs
                  converge at consecutive multiples of the GBS after the first eval)
These defaults follow the formulas; the package's CHECKs judge them (tests/unit/test_moe_benchmarks.py).
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from benchmarks.megatron_gpt import ADAMW_LOGGED, derive_schedule
from benchmarks.megatron_moe import MegatronMoeConfig


class DeepseekV3Config(MegatronMoeConfig):
    # ---- model: DeepSeek-V3 -----------------------------------------------------------------------
    num_layers: int = Field(61, ge=1)
    """Transformer layers (the first moe_first_dense_layers dense, the rest MoE)."""
    hidden_size: int = Field(7168, ge=8)
    """Model width d."""
    num_attention_heads: int = Field(128, ge=1)
    """Attention heads of MLA."""
    ffn_hidden_size: int = Field(18432, ge=8)
    """SwiGLU width of the dense layers' MLP."""
    multi_latent_attention: Literal[True] = True
    """Multi-latent attention (megatron MLASelfAttention); the provider builds no other."""
    # gpt-oss's attention fields: MLA has no KV groups, sets its own head widths, and DeepSeek-V3
    # neither windows, sinks nor biases, so each admits the one value the provider builds.
    num_query_groups: Literal[1] = 1  # pyrefly: ignore[bad-override]
    """Unused: MLA compresses keys and values into one latent instead of KV groups."""
    kv_channels: Literal[None] = None  # pyrefly: ignore[bad-override]
    """Unused: MLA's head widths are qk_head_dim + qk_pos_emb_head_dim and v_head_dim."""
    window_size: Literal[0] = 0  # pyrefly: ignore[bad-override]
    """No sliding window: every layer attends fully."""
    window_attn_skip_freq: Literal[1] = 1  # pyrefly: ignore[bad-override]
    """No sliding window (gpt-oss's alternation)."""
    attention_sinks: Literal[False] = False  # pyrefly: ignore[bad-override]
    """No learned softmax offsets."""
    add_bias_linear: Literal[False] = False  # pyrefly: ignore[bad-override]
    """No linear biases."""
    q_lora_rank: int = Field(1536, ge=0)
    """Compressed query width."""
    kv_lora_rank: int = Field(512, ge=0)
    """Compressed key/value latent width."""
    qk_head_dim: int = Field(128, ge=0)
    """Per-head query/key width without the rotary part."""
    qk_pos_emb_head_dim: int = Field(64, ge=0)
    """Per-head rotary query/key width."""
    v_head_dim: int = Field(128, ge=0)
    """Per-head value width."""
    num_moe_experts: int = Field(256, ge=1)
    """Routed experts per MoE layer."""
    moe_router_topk: int = Field(8, ge=1)
    """Routed experts per token."""
    moe_ffn_hidden_size: int = Field(2048, ge=1)
    """Each routed expert's SwiGLU width."""
    moe_shared_expert_intermediate_size: int = Field(2048, ge=0)
    """The one shared expert's SwiGLU width."""
    moe_router_score_function: Literal["softmax", "sigmoid"] = "sigmoid"
    """Per-expert sigmoid scores."""
    moe_router_enable_expert_bias: bool = True
    """Aux-loss-free balancing bias (a buffer)."""
    moe_router_num_groups: int = Field(8, ge=0)
    """Expert groups of group-limited routing."""
    moe_router_group_topk: int = Field(4, ge=0)
    """Groups each token's experts come from."""
    moe_first_dense_layers: int = Field(3, ge=0)
    """Dense first layers."""
    moe_aux_loss_coeff: float = Field(0.01, ge=0.0)
    """Sequence-level auxiliary balance loss coefficient (logged; closed: 0.01)."""
    mtp_num_layers: int = Field(1, ge=0)
    """Multi-token-prediction layers (one)."""
    pipeline_split_counts_embedding_and_loss: bool = True
    """Stages balance 1 (embedding) + 61 layers + 1 (MTP) + 1 (loss) = 64 units: PP 4 x VP 4 splits
    them into 16 chunks of 4, as the published layouts do."""
    max_sequence_length: int = Field(4096, ge=8)
    """Tokens per sequence (logged; 4096 in the closed division)."""
    vocab_size: int = Field(129280, ge=8)
    """DeepSeek-V3 tokenizer's vocabulary (untied input and output embeddings)."""
    rotary_base: int = Field(10000, ge=1)
    """RoPE base frequency theta (YaRN-extended in the original; the rope part only)."""
    norm_epsilon: float = Field(1.0e-6, gt=0.0)
    """RMSNorm epsilon."""

    # ---- optimizer and schedule (log keys) -------------------------------------------------------
    opt_base_learning_rate: float | None = Field(None, ge=0.0)  # pyrefly: ignore[bad-override]
    """Peak LR; default (and closed rule) 2.4e-5 x sqrt(GBS / 16384)."""
    opt_learning_rate_warmup_steps: int | None = Field(None, ge=0)
    """Linear warmup steps; default (and closed rule) 4."""
    opt_learning_rate_decay_steps: int | None = Field(None, ge=1)
    """Cosine decay steps; default (and closed rule) max_steps - warmup = 11,996."""
    max_steps: int = Field(12_000, ge=1)
    """The LR schedule's length in steps, logged `max_steps`; not a stop."""
    opt_adamw_epsilon: float = Field(1.0e-8, gt=0.0)
    """AdamW epsilon (fixed)."""

    # ---- data, evaluation, stopping --------------------------------------------------------------
    eval_interval_samples: int = Field(1, ge=1)
    """After the first eval, evaluate every ceil(eval_interval_samples / GBS) steps (1: every step)."""
    eval_first_samples: int | None = Field(None, ge=1)
    """Sequences trained before the first evaluation; default (and 6.1.0's rule) GBS x
    floor(42 + 24576 / GBS) (the tiny size: its own, in its tiny rules)."""
    eval_samples: int = Field(1024, ge=1)
    """Logged `eval_samples`: validation sequences per evaluation (closed: 1,024)."""
    train_samples_cap: int = Field(2_000_000, ge=1)
    """Stop (aborted) after this many sequences (the RCPs converge at 691,200-866,304)."""

    tiny_start_steps: int = Field(24, ge=0)
    """Tiny size: steps `mlperf prepare` pretrains the starting checkpoint for (the full size's is
    the reference's: DeepSeek-V3 after 50 router-adapting steps)."""

    FROM_CHECKPOINT: ClassVar[bool] = True
    START_WEIGHTS_ONLY: ClassVar[bool] = True  # the reference: load_optim=False, schedule from 0
    MODEL_PROVIDER: ClassVar[str] = "reference_impls.megatron_gpt.deepseek"
    LOGGED: ClassVar[tuple[str, ...]] = (*ADAMW_LOGGED, "moe_aux_loss_coeff")

    @model_validator(mode="after")
    def _derive(self):
        if self.opt_base_learning_rate is None:
            lr = 2.4e-5 * math.sqrt(self.global_batch_size / 16384)
            object.__setattr__(self, "opt_base_learning_rate", lr)
        derive_schedule(self, 4)  # the rules' warmup: 4 steps
        self._check_moe()
        return self

    def start_pretrain_steps(self) -> int:
        return self.tiny_start_steps

    def first_eval_samples(self) -> int:
        """6.1.0's first evaluation point: GBS x floor(42 + 24576 / GBS) sequences (or the field)."""
        gbs = self.global_batch_size
        return self.eval_first_samples or gbs * math.floor(42 + 24576 / gbs)

    def next_eval_step(self, step: int) -> int:
        first = math.ceil(self.first_eval_samples() / self.global_batch_size)
        return first if step < first else step + self.eval_interval_steps
