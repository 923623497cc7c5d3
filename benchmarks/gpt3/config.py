"""Typed GPT-3 config. Defaults are the reference (full size); configs/tiny.yaml shrinks the model.

Closed-rule arithmetic (training_rules v4.0), at the reference GBS 1536:
    warmup steps  = ceil(265    x 1536 / GBS)     e.g. GBS 2304 -> 177
    decay steps   = ceil(108600 x 1536 / GBS)     e.g. GBS 2304 -> 72,400
    ckpt step     = ceil(4000   x 1536 / GBS)     e.g. GBS 2304 -> 2,667
    eval interval = ceil(24576 / GBS) steps       e.g. GBS 2304 -> 11 steps = 25,344 sequences
    base LR       = 2e-5 for GBS <= 3072, 3e-5 above 4096 (either in between)
The tiny size keeps the same formulas with its own reference constants (reference_* fields).
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from benchmarks.megatron_gpt import MegatronGptConfig


class Gpt3Config(MegatronGptConfig):
    # ---- model: GPT-3 175B (the Megatron-GPT family's fields, benchmarks/megatron_gpt.py) ----
    num_layers: int = Field(96, ge=1)
    """Transformer layers."""
    hidden_size: int = Field(12288, ge=8)
    """Model width d."""
    num_attention_heads: int = Field(96, ge=1)
    """Attention heads (head width = hidden_size / heads)."""
    ffn_hidden_size: int = Field(49152, ge=8)
    """MLP width (4 d, GELU)."""
    max_sequence_length: int = Field(2048, ge=8)
    """Tokens per sequence (logged `max_sequence_length`; fixed at 2048 in the closed division)."""
    vocab_size: int = Field(50257, ge=8)
    """Vocabulary (C4 SentencePiece model at full size)."""
    init_method_std: float = Field(0.006, gt=0.0)
    """Std of the normal weight init (megatron init_method_std; matters only where no checkpoint loads)."""

    # ---- optimizer and schedule (log keys) ---------------------------------------------------
    opt_name: Literal["adam"] = "adam"
    """Logged `opt_name`; megatron's Adam with decoupled weight decay is the only optimizer built."""
    opt_base_learning_rate: float = Field(2.0e-5, ge=0.0)
    """Peak LR. Closed: 2e-5 (GBS <= 3072) or 3e-5 (GBS >= 4096)."""
    opt_learning_rate_warmup_steps: int | None = Field(None, ge=0)
    """Linear warmup steps from 0 to the peak LR; default ceil(reference_warmup_steps x reference_global_batch_size / GBS)."""
    opt_learning_rate_decay_steps: int | None = Field(None, ge=1)
    """Steps of the cosine decay to the end LR (counted from step 0); default ceil(reference_decay_steps x reference_global_batch_size / GBS)."""
    opt_adam_beta_1: float = Field(0.9, ge=0.0, lt=1.0)
    """Adam beta 1 (fixed)."""
    opt_adam_beta_2: float = Field(0.95, ge=0.0, lt=1.0)
    """Adam beta 2 (fixed)."""
    opt_adam_epsilon: float = Field(1.0e-8, gt=0.0)
    """Adam epsilon (fixed)."""
    opt_weight_decay: float = Field(0.1, ge=0.0)
    """Decoupled weight decay, constant over the run (fixed)."""
    init_checkpoint_step: int | None = Field(None, ge=0)
    """Step of the starting checkpoint at this GBS; default ceil(reference_checkpoint_step x ref GBS / GBS)."""

    # ---- rule constants (the reference's numbers at its GBS) ---------------------------------
    reference_global_batch_size: int = Field(1536, ge=1)
    """The GBS the reference's step counts below are given at (tiny: the tiny checkpoint's GBS)."""
    reference_warmup_steps: int = Field(265, ge=0)
    """Warmup steps at the reference GBS; scaled to this GBS for opt_learning_rate_warmup_steps."""
    reference_decay_steps: int = Field(108600, ge=1)
    """Decay steps at the reference GBS; scaled to this GBS for opt_learning_rate_decay_steps."""
    reference_checkpoint_step: int = Field(4000, ge=0)
    """The checkpoint is at 4000 steps x 1536 = 6,144,000 sequences."""

    # ---- data, evaluation, stopping ---------------------------------------------------------
    eval_interval_samples: int = Field(24576, ge=1)
    """Evaluate every ceil(eval_interval_samples / GBS) steps."""
    eval_samples: int = Field(11590004, ge=1)
    """Logged `eval_samples` (full: the reference's count; the validation set is the whole C4
    validation subset). Tiny: the validation sequences that `prepare` writes."""
    train_samples_cap: int = Field(20_000_000, ge=1)
    """Stop (aborted) after this many training sequences without reaching the target. It also sizes
    the shuffled training draw (megatron's GPTDataset samples this many sequences), so a different
    cap is a different data order: to stop a run early on the same data, use max_steps."""
    max_steps: int | None = Field(None, ge=1)
    """Stop (aborted) after this many steps, at most train_samples_cap // GBS (the default), the
    data order unchanged: a short run that retraces the first steps of the full one (the resume
    tests stop their resumed run here)."""

    MODEL_PROVIDER: ClassVar[str] = "reference_impls.megatron_gpt.gpt3"
    FROM_CHECKPOINT: ClassVar[bool] = True
    LOGGED: ClassVar[tuple[str, ...]] = (
        "max_sequence_length",
        "opt_name",
        "opt_base_learning_rate",
        "opt_end_learning_rate",
        "opt_learning_rate_decay_steps",
        "opt_learning_rate_warmup_steps",
        "opt_learning_rate_decay_schedule",
        "opt_adam_beta_1",
        "opt_adam_beta_2",
        "opt_adam_epsilon",
        "opt_weight_decay",
        "opt_gradient_clip_norm",
        "init_checkpoint_step",
    )

    @model_validator(mode="after")
    def _derive(self):
        scale = self.reference_global_batch_size / self.global_batch_size
        derived = {
            "opt_end_learning_rate": self.opt_base_learning_rate * 0.1,
            "opt_learning_rate_warmup_steps": math.ceil(self.reference_warmup_steps * scale),
            "opt_learning_rate_decay_steps": math.ceil(self.reference_decay_steps * scale),
            "init_checkpoint_step": math.ceil(self.reference_checkpoint_step * scale),
        }
        for k, v in derived.items():
            if getattr(self, k) is None:
                object.__setattr__(self, k, v)  # frozen model: fill derived values once
        self._check_shape()
        return self

    def adam(self) -> dict[str, float]:
        return {
            "adam_beta1": self.opt_adam_beta_1,
            "adam_beta2": self.opt_adam_beta_2,
            "adam_eps": self.opt_adam_epsilon,
            "weight_decay": self.opt_weight_decay,
        }

    def stop_step(self) -> int | None:
        return self.max_steps

    def start_step(self) -> int:
        assert self.init_checkpoint_step is not None  # derived above
        return self.init_checkpoint_step

    def start_pretrain_steps(self) -> int:
        return self.reference_checkpoint_step
