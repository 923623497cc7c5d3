"""Typed Llama 3.1 8B pretraining config (MLPerf Training v5.1-v6.1, `llama31_8b`). Defaults are the
reference (full size); configs/tiny.yaml shrinks the model. Trains from the init, no checkpoint.

Closed-rule arithmetic (closed_llama31_8b.yaml, the same in 5.1.0, 6.0.0 and 6.1.0):
    max_steps     = 1,200,000 (the LR schedule's length, logged)
    decay steps   = max_steps - warmup steps       e.g. warmup 128 -> 1,199,872
    warmup steps  = ceil(opt_learning_rate_warmup_samples / GBS)   tunable (RCPs: 256 at GBS 16 ...
                    32,768 at GBS 128)                e.g. 4,096 at GBS 32 -> 128 steps
    end LR        = 0.1 x base LR (training rules)
    eval interval = ceil(12288 / GBS) steps on 1,024 validation sequences
                                                    e.g. GBS 32 -> 384 steps = 12,288 sequences
The tiny size keeps the formulas with its own numbers (tiny.yaml: max_steps 600).
"""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import Field, model_validator

from benchmarks.megatron_gpt import AdamwPretrainConfig, derive_schedule


class Llama31Config(AdamwPretrainConfig):
    # ---- model: Llama 3.1 8B (provider reference_impls/megatron_gpt/llama31.py) -------------
    num_layers: int = Field(32, ge=1)
    """Transformer layers."""
    hidden_size: int = Field(4096, ge=8)
    """Model width d."""
    num_attention_heads: int = Field(32, ge=1)
    """Query heads (head width = hidden_size / heads = 128)."""
    num_query_groups: int = Field(8, ge=1)
    """Key/value heads (grouped-query attention: 4 query heads share one)."""
    ffn_hidden_size: int = Field(14336, ge=8)
    """SwiGLU width (each of the gate and up projections)."""
    max_sequence_length: int = Field(8192, ge=8)
    """Tokens per sequence (logged; 8192 in the closed division)."""
    vocab_size: int = Field(128256, ge=8)
    """Vocabulary of the Llama 3.1 tokenizer (untied input and output embeddings)."""
    rotary_base: int = Field(500000, ge=1)
    """RoPE base frequency theta."""
    rope_scaling_factor: float = Field(8.0, ge=1.0)
    """Llama 3.1's RoPE scaling of the low frequencies (megatron `rope_scaling`; 1 = none)."""
    norm_epsilon: float = Field(1.0e-5, gt=0.0)
    """RMSNorm epsilon."""

    # ---- optimizer and schedule (log keys) ---------------------------------------------------
    opt_base_learning_rate: float = Field(8.0e-4, ge=0.0)
    """Peak LR (RCPs: 4e-4 at GBS 16, 8e-4 at 32 and 64, 1e-3 at 96, 2e-3 at 128)."""
    opt_learning_rate_warmup_samples: int = Field(4096, ge=0)
    """Warmup in sequences (the RCPs' unit); warmup steps = ceil(this / GBS) unless set."""
    opt_learning_rate_warmup_steps: int | None = Field(None, ge=0)
    """Linear warmup steps from 0 to the peak LR; default ceil(opt_learning_rate_warmup_samples / GBS)."""
    opt_learning_rate_decay_steps: int | None = Field(None, ge=1)
    """Steps of the cosine decay to the end LR; default (and closed rule) max_steps - warmup steps."""

    # ---- data, evaluation, stopping ---------------------------------------------------------
    eval_interval_samples: int = Field(12288, ge=1)
    """Evaluate every ceil(eval_interval_samples / GBS) steps (rules: ceil(12288 / GBS) x GBS sequences)."""
    eval_samples: int = Field(1024, ge=1)
    """Logged `eval_samples`: the first 1,024 sequences of the C4 validation file (tiny: `prepare`'s)."""
    train_samples_cap: int = Field(10_000_000, ge=1)
    """Stop (aborted) after this many training sequences without reaching the target (the RCPs
    converge at 161,109-344,747); it also sizes GPTDataset's shuffled draw."""

    MODEL_PROVIDER: ClassVar[str] = "reference_impls.megatron_gpt.llama31"

    @model_validator(mode="after")
    def _derive(self):
        derive_schedule(self, math.ceil(self.opt_learning_rate_warmup_samples / self.global_batch_size))
        self._check_shape()
        if self.num_attention_heads % self.num_query_groups:
            raise ValueError(
                f"num_attention_heads {self.num_attention_heads} is not a multiple of "
                f"num_query_groups {self.num_query_groups}"
            )
        return self
