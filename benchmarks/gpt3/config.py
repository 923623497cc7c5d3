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
from importlib.util import find_spec
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from benchmarks.base import BenchmarkConfig, Switch


class Gpt3Config(BenchmarkConfig):
    # ---- model (megatron-core GPTModel) -----------------------------------------------------
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
    make_vocab_size_divisible_by: int = Field(128, ge=1)
    """Embedding/output rows are padded to a multiple of this x TP, as Megatron-LM's flag of the
    same name does (megatron-core itself needs the vocabulary divisible by TP): 50257 -> 50688 at
    TP 4. The tiny size sets 1: its 256 tokens divide every TP, so one checkpoint fits all."""
    init_method_std: float = Field(0.006, gt=0.0)
    """Std of the normal weight init (megatron init_method_std; matters only where no checkpoint loads)."""
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    """Hidden and attention dropout (the reference trains without dropout)."""

    # ---- optimizer and schedule (log keys) ---------------------------------------------------
    opt_name: Literal["adam"] = "adam"
    """Logged `opt_name`; megatron's Adam with decoupled weight decay is the only optimizer built."""
    opt_base_learning_rate: float = Field(2.0e-5, ge=0.0)
    """Peak LR. Closed: 2e-5 (GBS <= 3072) or 3e-5 (GBS >= 4096)."""
    opt_end_learning_rate: float | None = Field(None, ge=0.0)
    """Floor of the cosine decay; default 10 % of the base LR."""
    opt_learning_rate_warmup_steps: int | None = Field(None, ge=0)
    """Linear warmup steps from 0 to the peak LR; default ceil(reference_warmup_steps x reference_global_batch_size / GBS)."""
    opt_learning_rate_decay_steps: int | None = Field(None, ge=1)
    """Steps of the cosine decay to the end LR (counted from step 0); default ceil(reference_decay_steps x reference_global_batch_size / GBS)."""
    opt_learning_rate_decay_schedule: Literal["cosine with linear warmup"] = "cosine with linear warmup"
    """Logged schedule name; the only schedule built (megatron's OptimizerParamScheduler, cosine)."""
    opt_adam_beta_1: float = Field(0.9, ge=0.0, lt=1.0)
    """Adam beta 1 (fixed)."""
    opt_adam_beta_2: float = Field(0.95, ge=0.0, lt=1.0)
    """Adam beta 2 (fixed)."""
    opt_adam_epsilon: float = Field(1.0e-8, gt=0.0)
    """Adam epsilon (fixed)."""
    opt_weight_decay: float = Field(0.1, ge=0.0)
    """Decoupled weight decay, constant over the run (fixed)."""
    opt_gradient_clip_norm: float = Field(1.0, ge=0.0)
    """Global gradient-norm clip (fixed)."""
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
    checkpoint_interval_steps: int = Field(1000, ge=0)
    """Resumable checkpoint (`mlperf run --resume`) at the first eval boundary after every N steps;
    0 = never. Full: 1000 as submitters do; tiny: a few seconds' worth."""

    # ---- performance switches (where each is honoured: SWITCHES below) ------------------------
    distributed_optimizer: bool = False
    """Shard the fp32 master weights and Adam moments over DP ranks (megatron distributed optimizer)."""
    sequence_parallel: bool = False
    """Megatron sequence parallelism: activations outside attention/MLP split over the TP ranks (TP >= 2)."""
    tp_comm_overlap: bool = False
    """Overlap TP collectives with GEMMs (Transformer Engine userbuffers; needs sequence_parallel)."""
    overlap_grad_reduce: bool = True
    """Overlap the DP gradient reduce-scatter with backward."""
    overlap_param_gather: bool = False
    """Overlap the distributed optimizer's param all-gather with forward (needs distributed_optimizer)."""
    activation_recompute: Literal["none", "selective", "full"] = "none"
    """Megatron activation recompute: 'selective' (core attention) or 'full' (every layer, uniform)."""
    precision: Literal["fp32", "bf16"] = "bf16"
    """Params and activations dtype on CPU and GPU: bf16 = bf16 model (megatron Float16Module) with
    fp32 master weights, grads reduced in fp32. The tiny size keeps fp32 (its layout and resume tests
    compare curves to 1e-5; bf16 is tested against it in tests/integration/test_gpt3_bf16.py)."""

    MODEL_PROVIDER: ClassVar[str] = "reference_impls.megatron_gpt.gpt3"
    """The Megatron-GPT family's model provider for this config (reference_impls/megatron_gpt/)."""
    SWITCHES: ClassVar[dict[str, Switch]] = {
        "fp8": Switch(
            ("gpu",), "Transformer Engine FP8 (hybrid e4m3/e5m2) needs CUDA", library="transformer_engine"
        ),
        "cuda_graphs": Switch(
            ("gpu",),
            "megatron's per-layer CUDA graphs need CUDA and Transformer Engine",
            library="transformer_engine",
        ),
        # On CPU through reference_impls/megatron_gpt/cpu_compat.py under gloo (tests/integration/test_gpt3_tp2.py).
        "distributed_optimizer": Switch(("cpu", "gpu"), ""),
        "sequence_parallel": Switch(("cpu", "gpu"), "", min_degree=(("tp", 2),)),
        "overlap_param_gather": Switch(("cpu", "gpu"), "", needs=("distributed_optimizer",)),
        "tp_comm_overlap": Switch(
            ("gpu",),
            "Transformer Engine userbuffers need CUDA",
            needs=("sequence_parallel",),
            library="transformer_engine",
        ),
        "overlap_grad_reduce": Switch(("cpu", "gpu"), ""),
        "activation_recompute": Switch(("cpu", "gpu"), "", off="none"),
        # bf16 on CPU too: CPU torch computes bf16 GEMMs and norms (tests/integration/test_gpt3_bf16.py).
        "precision": Switch(("cpu", "gpu"), "", off="fp32"),
        # Refused everywhere: megatron-core's CP attention (TE only) expects each rank to hold its
        # 2 x CP load-balanced chunks of the sequence, and the loop does not split the batch
        # (get_batch_on_this_cp_rank), reduce loss/tokens over the CP group or count evals over the
        # whole sequence. Not in SUPPORTS either, so the planner never proposes it.
        "context_parallel_size": Switch(
            (),
            "not implemented: the batch is not split per CP rank, nor loss and tokens reduced over CP",
            off=1,
        ),
    }
    SUPPORTS: ClassVar[tuple[str, ...]] = ("tp", "pp", "vp")

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
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                f"{self.num_attention_heads}"
            )
        return self

    @property
    def eval_interval_steps(self) -> int:
        return math.ceil(self.eval_interval_samples / self.global_batch_size)

    def lowest_precision(self, device: str) -> dict[str, str]:
        """What reference_impls/megatron_gpt/model.py builds (the keys: BenchmarkConfig.lowest_precision)."""
        dtype = self.LOG_DTYPE[self.precision]
        gpu = device.startswith("cuda")
        fp8 = gpu and self.fp8  # transformer_config(): `on_gpu and cfg.fp8`, else fp8 is never read
        # linear: TE's FP8 GEMMs (fp8="hybrid"), else params_dtype; TE runs an all-fp32 GEMM in
        # cuBLAS's TF32 compute type, and layer_spec() takes the TE spec on CUDA wherever it imports.
        if fp8:
            linear = "fp8"
        elif gpu and dtype == "fp32" and find_spec("transformer_engine") is not None:
            linear = "tf32"
        else:
            linear = dtype
        # attn: core attention (TE's or megatron's local one) in params_dtype: the FP8 recipe leaves
        # it out (fp8_dot_product_attention is never set).
        attn = dtype
        # comm: build()'s DDP reduces grads in fp32 (grad_reduce_in_fp32=True); TP collectives, PP
        # sends and the distributed optimizer's param all-gather carry params_dtype; under FP8 with
        # sequence parallelism TE all-gathers the GEMM inputs already cast to FP8.
        tp = self.tensor_model_parallel_size
        if fp8 and self.sequence_parallel and tp > 1:
            comm = "fp8"
        elif tp > 1 or self.pipeline_model_parallel_size > 1 or self.distributed_optimizer:
            comm = dtype
        else:
            comm = "fp32"
        return {"linear": linear, "attn": attn, "comm": comm}
