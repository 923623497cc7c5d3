"""The typed config that every Megatron-GPT pretraining benchmark shares (gpt3, llama31_8b): the
fields reference_impls/megatron_gpt/ reads, the switches it honours, and the few hooks through
which a benchmark says what is its own (the optimizer's log names, the starting checkpoint, the
hyperparameters it logs). A benchmark's config subclasses it, sets its full-size defaults, adds
its rule constants and names its model provider (`MODEL_PROVIDER`).
"""

from __future__ import annotations

import math
from importlib.util import find_spec
from typing import Any, ClassVar, Literal

from pydantic import Field

from benchmarks.base import BenchmarkConfig, Switch


class MegatronGptConfig(BenchmarkConfig):
    # ---- model (megatron-core GPTModel; the architecture is the provider's) -------------------
    num_layers: int = Field(ge=1)
    """Transformer layers."""
    hidden_size: int = Field(ge=8)
    """Model width d."""
    num_attention_heads: int = Field(ge=1)
    """Attention (query) heads; head width = hidden_size / heads."""
    ffn_hidden_size: int = Field(ge=8)
    """MLP width (per branch for a gated MLP)."""
    max_sequence_length: int = Field(ge=8)
    """Tokens per sequence (logged `max_sequence_length`; fixed by the closed rules)."""
    vocab_size: int = Field(ge=8)
    """Vocabulary of the tokenizer the data was made with."""
    make_vocab_size_divisible_by: int = Field(128, ge=1)
    """Embedding/output rows are padded to a multiple of this x TP, as Megatron-LM's flag of the
    same name does (megatron-core itself needs the vocabulary divisible by TP): 50257 -> 50688 at
    TP 4. The tiny sizes set 1: their 256 tokens divide every TP, so one checkpoint fits all."""
    init_method_std: float = Field(0.02, gt=0.0)
    """Std of the normal weight init (megatron init_method_std)."""
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    """Hidden and attention dropout (the references train without dropout)."""

    # ---- optimizer and schedule (log keys; the Adam names are the benchmark's: adam()) --------
    opt_base_learning_rate: float = Field(ge=0.0)
    """Peak LR."""
    opt_end_learning_rate: float | None = Field(None, ge=0.0)
    """Floor of the cosine decay; default 10 % of the base LR."""
    opt_learning_rate_warmup_steps: int | None = Field(None, ge=0)
    """Linear warmup steps from 0 to the peak LR (default: the benchmark's rule)."""
    opt_learning_rate_decay_steps: int | None = Field(None, ge=1)
    """Steps of the cosine decay to the end LR (default: the benchmark's rule)."""
    opt_learning_rate_decay_schedule: Literal["cosine with linear warmup"] = "cosine with linear warmup"
    """Logged schedule name; the only schedule built (megatron's OptimizerParamScheduler, cosine)."""
    opt_gradient_clip_norm: float = Field(1.0, ge=0.0)
    """Global gradient-norm clip (fixed)."""

    # ---- data, evaluation, stopping ---------------------------------------------------------
    eval_interval_samples: int = Field(ge=1)
    """Evaluate every ceil(eval_interval_samples / GBS) steps."""
    eval_samples: int = Field(ge=1)
    """Logged `eval_samples`: the validation sequences of every eval. Tiny: the ones `prepare` writes."""
    train_samples_cap: int = Field(ge=1)
    """Stop (aborted) after this many training sequences without reaching the target. It also sizes
    the shuffled training draw (megatron's GPTDataset samples this many sequences), so a different
    cap is a different data order: to stop a run early on the same data, use stop_step()'s field."""
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
    overlap_grad_reduce: bool = False
    """Overlap the DP gradient reduce-scatter with backward. Off by default: a speed switch, on only
    where a GPU measurement shows it faster (benchmarks/base.py SPEED_SWITCHES); the same sums
    either way (on CPU under gloo: tests/integration/test_gpt3_tp2.py, test_gpt3_resume.py)."""
    overlap_param_gather: bool = False
    """Overlap the distributed optimizer's param all-gather with forward (needs distributed_optimizer)."""
    activation_recompute: Literal["none", "selective", "full"] = "none"
    """Megatron activation recompute: 'selective' (core attention) or 'full' (every layer, uniform)."""
    precision: Literal["fp32", "bf16"] = "bf16"
    """Params and activations dtype on CPU and GPU: bf16 = bf16 model (megatron Float16Module) with
    fp32 master weights, grads reduced in fp32. The tiny sizes keep fp32 (their layout and resume
    tests compare curves to 1e-5; bf16 is tested against it in tests/integration/test_gpt3_bf16.py)."""

    MODEL_PROVIDER: ClassVar[str] = ""
    """The family's model provider module for this config (reference_impls/megatron_gpt/<model>.py)."""
    FROM_CHECKPOINT: ClassVar[bool] = False
    """The run starts from a checkpoint (gpt3: the reference's, at start_step(); tiny: one that
    `prepare` pretrains), else from the init (llama31_8b: pretraining from scratch)."""
    START_WEIGHTS_ONLY: ClassVar[bool] = False
    """The starting checkpoint is read for the model's weights only, with a fresh optimizer
    (deepseekv3_671b: the reference loads with load_optim=False); else model and Adam state (gpt3)."""
    LOGGED: ClassVar[tuple[str, ...]] = ()
    """Config fields the run logs under their own names, after global_batch_size and
    gradient_accumulation_steps (the benchmark's closed_<name>.yaml keys)."""
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

    # ---- what each benchmark says of its own ---------------------------------------------------
    def adam(self) -> dict[str, float]:
        """megatron OptimizerConfig's adam_beta1, adam_beta2, adam_eps and weight_decay, from the
        benchmark's fields (its rules name them: opt_adam_* for gpt3, opt_adamw_* for llama31_8b)."""
        raise NotImplementedError

    def start_step(self) -> int:
        """The optimizer step the run starts at (the LR schedule's position): the starting
        checkpoint's, or 0 from scratch."""
        return 0

    def start_pretrain_steps(self) -> int:
        """Tiny size: steps `prepare` pretrains the starting checkpoint for (FROM_CHECKPOINT only)."""
        return 0

    def decay_end_step(self) -> int:
        """The step the cosine decay reaches the end LR at (megatron's lr_decay_steps, counted
        from step 0): opt_learning_rate_decay_steps where the rules count decay that way (gpt3)."""
        assert self.opt_learning_rate_decay_steps is not None  # derived by the benchmark's validator
        return self.opt_learning_rate_decay_steps

    def stop_step(self) -> int | None:
        """Stop (aborted) after this many steps with the data order unchanged (the tests' short
        runs); None: at train_samples_cap // GBS. The field is the benchmark's (gpt3 `max_steps`;
        llama31_8b `stop_after_steps`, its rules' `max_steps` being the schedule's length)."""
        return None

    def logged(self) -> dict:
        """The hyperparameters logged under the rules' keys (LOGGED, by default)."""
        return {f: getattr(self, f) for f in self.LOGGED}

    def _check_shape(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                f"{self.num_attention_heads}"
            )

    @property
    def eval_interval_steps(self) -> int:
        return math.ceil(self.eval_interval_samples / self.global_batch_size)

    def next_eval_step(self, step: int) -> int:
        """The optimizer step of the evaluation after `step` (every eval_interval_steps; a
        benchmark whose rules fix the first point otherwise overrides it)."""
        return step + self.eval_interval_steps

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


# ---- the C4 pretraining rules' AdamW and schedule (llama31_8b, gpt_oss_20b, deepseekv3_671b) -------
ADAMW_LOGGED: tuple[str, ...] = (
    "max_sequence_length",
    "opt_name",
    "opt_base_learning_rate",
    "opt_end_learning_rate",
    "opt_learning_rate_warmup_steps",
    "opt_learning_rate_decay_steps",
    "opt_learning_rate_decay_schedule",
    "opt_adamw_beta_1",
    "opt_adamw_beta_2",
    "opt_adamw_epsilon",
    "opt_adamw_weight_decay",
    "opt_gradient_clip_norm",
    "max_steps",
)
"""The hyperparameters these benchmarks' closed rules log under their own names (LOGGED)."""


def derive_schedule(cfg: Any, warmup_steps: int) -> None:
    """Fill what the rules derive, where not set: end LR = 10 % of the base LR, the given warmup,
    decay = max_steps - warmup (the cosine then ends at max_steps)."""
    if cfg.opt_end_learning_rate is None:
        object.__setattr__(cfg, "opt_end_learning_rate", cfg.opt_base_learning_rate * 0.1)
    if cfg.opt_learning_rate_warmup_steps is None:
        object.__setattr__(cfg, "opt_learning_rate_warmup_steps", warmup_steps)
    if cfg.opt_learning_rate_decay_steps is None:
        decay = max(1, cfg.max_steps - cfg.opt_learning_rate_warmup_steps)
        object.__setattr__(cfg, "opt_learning_rate_decay_steps", decay)


class AdamwPretrainConfig(MegatronGptConfig):
    """What the C4 pretraining rules of llama31_8b, gpt_oss_20b and deepseekv3_671b share: AdamW
    under its own log names, a schedule `max_steps` long (warmup, then the cosine decay to 10 %
    of the base LR until max_steps: derive_schedule), and the keys they log (ADAMW_LOGGED)."""

    opt_name: Literal["adamw"] = "adamw"
    """Logged `opt_name`: megatron's Adam with decoupled weight decay (AdamW)."""
    max_steps: int = Field(1_200_000, ge=1)
    """The LR schedule's length in steps, logged `max_steps` (closed: 1,200,000 for llama31_8b and
    gpt_oss_20b). Not a stop: a short run on the same data stops through stop_step()."""
    opt_adamw_beta_1: float = Field(0.9, ge=0.0, lt=1.0)
    """AdamW beta 1 (fixed)."""
    opt_adamw_beta_2: float = Field(0.95, ge=0.0, lt=1.0)
    """AdamW beta 2 (fixed)."""
    opt_adamw_epsilon: float = Field(1.0e-5, gt=0.0)
    """AdamW epsilon (fixed)."""
    opt_adamw_weight_decay: float = Field(0.1, ge=0.0)
    """Decoupled weight decay, constant over the run (fixed)."""

    stop_after_steps: int | None = Field(None, ge=1)
    """Stop (aborted) after this many steps, the data order unchanged (the tests' short runs)."""

    LOGGED: ClassVar[tuple[str, ...]] = ADAMW_LOGGED

    def stop_step(self) -> int | None:
        return self.stop_after_steps

    def adam(self) -> dict[str, float]:
        return {
            "adam_beta1": self.opt_adamw_beta_1,
            "adam_beta2": self.opt_adamw_beta_2,
            "adam_eps": self.opt_adamw_epsilon,
            "weight_decay": self.opt_adamw_weight_decay,
        }

    def decay_end_step(self) -> int:
        """Decay runs after the warmup for opt_learning_rate_decay_steps (= max_steps - warmup by
        the rules), so it ends at max_steps."""
        assert self.opt_learning_rate_warmup_steps is not None and self.opt_learning_rate_decay_steps
        return self.opt_learning_rate_warmup_steps + self.opt_learning_rate_decay_steps
