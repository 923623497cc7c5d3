"""Typed Llama 2 70B LoRA config. Defaults are the reference (full size); configs/tiny.yaml shrinks it.

Closed-rule arithmetic (training_rules v4.0, closed_llama2_70b_lora.yaml):
    eval interval = ceil(384 / GBS) steps             e.g. GBS 8 -> 48 steps = 384 sequences
    skipped evals = floor(0.125 x GBS + 2)            e.g. GBS 8 -> 3, first eval at 4 x 384 = 1,536
                                                           GBS 128 -> 18, first eval at 19 x 384 = 7,296
    schedule      = cosine from the base LR to 0 over opt_learning_rate_training_steps, after
                    warmup_factor x training_steps linear warmup steps (reference: factor 0)
Layout: the reference fine-tunes with data-parallel FSDP sharding (every rank holds 1/world of
the frozen base weights). DP = world / CP, GA = GBS / (DP x MBS). Context parallelism (CP) splits
each sequence over CP ranks (Llama 3's all-gather of K/V, reference_impls/llama2_70b_lora/
context_parallel.py), FSDP still over all DP x CP ranks. Tensor and pipeline parallelism are not
implemented (refused; FSDP covers the memory that NVIDIA's TP 4 covers; see configs/*.yaml for
the mapping of their record layouts).
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from benchmarks.base import BenchmarkConfig, Switch


class Llama2LoraConfig(BenchmarkConfig):
    global_batch_size: int = Field(8, ge=1)
    """Sequences per optimizer step across all ranks (logged `global_batch_size`; reference 8)."""

    # ---- model (transformers LlamaForCausalLM with a fused qkv_proj) --------------------------
    num_layers: int = Field(80, ge=1)
    """Decoder layers."""
    hidden_size: int = Field(8192, ge=8)
    """Model width d."""
    intermediate_size: int = Field(28672, ge=8)
    """SwiGLU MLP width."""
    num_attention_heads: int = Field(64, ge=1)
    """Query heads."""
    num_key_value_heads: int = Field(8, ge=1)
    """Key/value heads (grouped-query attention)."""
    vocab_size: int = Field(32000, ge=8)
    """Llama 2 SentencePiece vocabulary."""
    max_sequence_length: int = Field(8192, ge=8)
    """Tokens per sequence (inputs padded/truncated to it; fixed at 8192 in the closed division)."""
    rope_theta: float = Field(10000.0, gt=0.0)
    """RoPE base."""
    rms_norm_eps: float = Field(1.0e-5, gt=0.0)
    """RMSNorm epsilon."""

    # ---- LoRA (fixed by the closed rules) ------------------------------------------------------
    lora_rank: int = Field(16, ge=1)
    """LoRA rank r (logged `lora_rank`; the checker requires 16)."""
    lora_alpha: int = Field(32, ge=1)
    """LoRA scaling numerator: the update is (alpha / r) x B A (logged `lora_alpha`)."""
    lora_dropout: float = Field(0.1, ge=0.0, lt=1.0)
    """Dropout on the LoRA input."""
    lora_target_modules: list[str] = ["qkv_proj", "o_proj"]
    """Adapted projections: the reference's fused query/key/value projection and the output one."""

    # ---- optimizer and schedule (log keys) ----------------------------------------------------
    opt_base_learning_rate: float = Field(4.0e-4, gt=0)
    """Peak LR (reference 4e-4; NVIDIA's records use 3.6e-4 .. 6e-4)."""
    opt_learning_rate_warmup_factor: float = Field(0.0, ge=0.0, lt=1.0)
    """Linear warmup length as a fraction of opt_learning_rate_training_steps (reference 0)."""
    opt_learning_rate_training_steps: int = Field(1024, ge=1)
    """Length of the cosine schedule in steps (LR reaches 0 there); also the step cap."""
    max_steps: int | None = Field(None, ge=1)
    """Stop (aborted) after this many steps without reaching the target; default the schedule length."""
    opt_gradient_clip_norm: float = Field(0.3, ge=0.0)
    """Global gradient-norm clip (fixed)."""
    opt_adamw_weight_decay: float = Field(1.0e-4, ge=0.0)
    """AdamW decoupled weight decay (fixed)."""
    opt_adamw_beta_1: float = Field(0.9, ge=0.0, lt=1.0)
    """AdamW beta 1 (fixed)."""
    opt_adamw_beta_2: float = Field(0.999, ge=0.0, lt=1.0)
    """AdamW beta 2 (fixed)."""
    opt_adamw_epsilon: float = Field(1.0e-8, gt=0.0)
    """AdamW epsilon (fixed)."""

    # ---- data, evaluation ---------------------------------------------------------------------
    dataset_dir: str = "gov_report"
    """Under --data-dir: train-00000-of-00001.parquet and validation-00000-of-00001.parquet."""
    model_dir: str = "model"
    """Under --data-dir: the base checkpoint (config.json + *.safetensors; fused or split QKV)."""
    train_samples: int = Field(3901, ge=1)
    """Training sequences (logged `train_samples`; GovReport 3,901)."""
    eval_samples: int = Field(173, ge=1)
    """Evaluation sequences (logged `eval_samples`; GovReport 173)."""
    eval_interval_samples: int = Field(384, ge=1)
    """Evaluate every ceil(eval_interval_samples / GBS) steps."""
    skip_evals: int | None = Field(None, ge=0)
    """Evaluations skipped at the start; default floor(0.125 x GBS + 2) as the rules say."""
    eval_micro_batch_size: int = Field(1, ge=1)
    """Sequences per rank per eval forward (the loss is a mean of per-sequence means either way)."""
    checkpoint_interval_steps: int = Field(192, ge=0)
    """Resumable checkpoint (`mlperf run --resume`: LoRA weights, AdamW state, RNGs) at the first
    eval slot after every N steps; 0 = never. Full: 192 (every 4th eval at GBS 8; the whole run is
    ~1000 steps, and the LoRA state is small); tiny: a few seconds' worth."""

    # ---- tiny size: what `prepare` builds ----------------------------------------------------
    tiny_pretrain_steps: int = Field(300, ge=0)
    """Full-parameter steps that pretrain the tiny base model on the synthetic corpus."""
    tiny_num_topics: int = Field(8, ge=1)
    """Topics of the synthetic reports; each topic has its own word distribution and summary."""
    tiny_summary_length: int = Field(8, ge=1)
    """Tokens in a synthetic summary (then EOS)."""
    tiny_summary_noise: float = Field(0.1, ge=0.0, le=1.0)
    """Chance that a summary token is a random topic word instead of the topic's template word."""

    # ---- performance switches -----------------------------------------------------------------
    precision: Literal["fp32", "bf16"] = "bf16"
    """Compute dtype of the frozen base weights and activations; the LoRA weights stay fp32."""
    activation_checkpointing: bool = True
    """Recompute each decoder layer in backward (needed for 8k tokens at 70B)."""
    fsdp: bool = True
    """Shard the base weights over all ranks with torch FSDP2 (fully_shard); no-op for one rank.
    Off is refused above one rank: FSDP is the implementation's only gradient sync."""
    compile: bool = False
    """torch.compile each decoder layer (inductor; runs on CPU too, where compiling takes minutes)."""

    SWITCHES: ClassVar[dict[str, Switch]] = {
        "fp8": Switch(("gpu",), "torchao float8 training needs CUDA (H100/H200)", library="torchao"),
        "cuda_graphs": Switch(
            (), "no CUDA-graph capture is implemented; NVIDIA's v4.0 Llama 2 LoRA records used none either"
        ),
        # No library=: inductor compiles for CPU with the host C++ compiler (ran here); CUDA builds
        # bring triton with torch.
        "compile": Switch(("cpu", "gpu"), ""),
        "activation_checkpointing": Switch(("cpu", "gpu"), ""),
        "fsdp": Switch(
            ("cpu", "gpu"),
            "FSDP is the only gradient sync; without it each rank would train its own copy",
            off_max_degree=(("world_size", 1),),
        ),
        # Honoured on CPU and GPU by the same code (K/V all-gather + explicit causal mask over SDPA,
        # gloo or NCCL); proven on CPU only: tests/integration/test_llama2_cp.py (CP 2 equals CP 1).
        "context_parallel_size": Switch(
            ("cpu", "gpu"),
            "the load-balanced K/V all-gather runs under gloo and NCCL alike (GPU not yet run)",
            off=1,
        ),
    }
    # CP: not torch's ring attention (it shards only the CUDA SDPA ops: a CPU could not run it) but
    # Llama 3's scheme, whose CPU path is the GPU path (context_parallel.py).
    SUPPORTS: ClassVar[tuple[str, ...]] = ("cp",)

    @model_validator(mode="after")
    def _derive(self):
        if self.skip_evals is None:
            object.__setattr__(self, "skip_evals", math.floor(0.125 * self.global_batch_size + 2))
        if self.max_steps is None:
            object.__setattr__(self, "max_steps", self.opt_learning_rate_training_steps)
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                f"{self.num_attention_heads}"
            )
        chunks = 2 * self.context_parallel_size  # CP rank r holds chunks r and 2 CP - 1 - r
        if self.max_sequence_length % chunks:
            raise ValueError(
                f"max_sequence_length {self.max_sequence_length} is not divisible by 2 x "
                f"context_parallel_size = {chunks} (each sequence is cut into 2 x CP equal chunks)"
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads {self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads {self.num_key_value_heads}"
            )
        return self

    @property
    def eval_interval_steps(self) -> int:
        return math.ceil(self.eval_interval_samples / self.global_batch_size)

    @property
    def warmup_steps(self) -> int:
        return int(self.opt_learning_rate_warmup_factor * self.opt_learning_rate_training_steps)

    def lowest_precision(self, device: str) -> dict[str, str]:
        """What reference_impls/llama2_70b_lora builds (the keys: BenchmarkConfig.lowest_precision)."""
        dtype = self.LOG_DTYPE[self.precision]
        return {
            # train.build casts the frozen base to `precision` (the fp32 LoRA matmuls are not the
            # lowest); fp8: model.convert_fp8 swaps its linears but lm_head for torchao Float8Linear
            # (CUDA only: elsewhere it stops the run).
            "linear": "fp8" if self.fp8 else dtype,
            # SDPA on q/k/v in the base's dtype (Float8Linear returns its input's dtype).
            "attn": dtype,
            # FSDP2, the only sync (model.shard_fsdp): params all-gathered in param_dtype=`precision`
            # (torchao's FP8 all-gather is left off), LoRA grads reduce-scattered in fp32.
            "comm": dtype,
        }

    def lr_at(self, step: int) -> float:
        """LR for optimizer step `step` (0-based): linear warmup, then cosine to 0."""
        w, n = self.warmup_steps, self.opt_learning_rate_training_steps
        if step < w:
            return self.opt_base_learning_rate * (step + 1) / w
        t = min(1.0, (step - w) / max(1, n - w))
        return self.opt_base_learning_rate * 0.5 * (1.0 + math.cos(math.pi * t))
