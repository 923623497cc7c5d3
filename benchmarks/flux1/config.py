"""Typed FLUX.1 text-to-image config (MLPerf Training v5.1-v6.1, `flux1`). Defaults are the reference
(torchtitan's flux_schnell_mlperf_preprocessed.toml with the RCP at GBS 512); configs/tiny.yaml
shrinks the model. Trains from the init on precomputed T5/CLIP encodings and VAE moments.

Closed-rule arithmetic (closed_flux1.yaml; the RCPs, rcps_flux1.json, 6.0.0 = 6.1.0):
    LR, warmup      tunable: RCPs 2e-4 / 1600 steps at GBS 512, 2.5e-4 / 800 at 1024, 2.5e-4 / 0 at
                    2048, 4e-4 / 100 at 4096; then constant (the reference's schedule has no decay)
    AdamW           (0.9, 0.95), eps 1e-8, weight decay 0.1, clip 1.0: fixed
    eval interval   ceil(262144 / GBS) steps = ceil(262144 / GBS) x GBS samples (6.1.0's check;
                    6.0.0 checks the literal 262144, equal wherever GBS divides it: 512 ... 4096)
                    e.g. GBS 512 -> 512 steps; on 29,696 COCO samples, 3,712 per timestep 0/8 ... 7/8
    batch           GBS = DP x MBS x GA, e.g. 512 = 64 ranks x 8 x 1 (dgx-h100x8)
The quality target (validation loss <= 0.586, the mean of the 8 per-timestep means) is in benchmark.yaml.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from benchmarks.base import BenchmarkConfig, Switch


class Flux1Config(BenchmarkConfig):
    global_batch_size: int = Field(512, ge=1)
    """Images per optimizer step across all ranks (logged `global_batch_size`; RCPs 512 ... 4096)."""

    # ---- transformer (diffusers FluxTransformer2DModel; defaults = FLUX.1-schnell) -------------
    num_layers: int = Field(19, ge=1)
    """Double-stream (MMDiT) blocks: image and text tokens with their own weights, joint attention."""
    num_single_layers: int = Field(38, ge=0)
    """Single-stream blocks over the concatenated text + image tokens."""
    attention_head_dim: int = Field(128, ge=2)
    """Width of one attention head; equal to the sum of axes_dims_rope."""
    num_attention_heads: int = Field(24, ge=1)
    """Heads per block (width = heads x head dim = 3072)."""
    axes_dims_rope: list[int] = [16, 56, 56]
    """RoPE channels per position axis (text index, latent row, latent column)."""
    joint_attention_dim: int = Field(4096, ge=2)
    """Width of the T5 encoder states the double blocks attend to (T5-v1.1-XXL: 4096)."""
    pooled_projection_dim: int = Field(768, ge=2)
    """Width of the pooled CLIP vector in the modulation (CLIP-L: 768)."""
    text_max_length: int = Field(256, ge=1)
    """T5 tokens per caption (the reference pads/truncates to 256)."""
    latent_channels: int = Field(16, ge=1)
    """VAE latent channels (FLUX.1's autoencoder: 16); 2x2 packing gives 4 x this per token."""
    latent_size: int = Field(32, ge=2, multiple_of=2)
    """Latent height = width (256 px / VAE factor 8); tokens = (latent_size / 2)^2 = 256."""
    vae_shift_factor: float | None = 0.1159
    """Latents are (z - shift) x scale (FLUX.1 autoencoder). None: the tiny VAE's, from its config."""
    vae_scale_factor: float | None = Field(0.3611, gt=0.0)
    """See vae_shift_factor."""

    # ---- rectified flow ---------------------------------------------------------------------
    caption_dropout: float = Field(0.1, ge=0.0, le=1.0)
    """Probability that a training sample's T5 and CLIP encodings are replaced by the empty
    caption's (the reference's classifier-free-guidance dropout; never at evaluation)."""
    eval_timesteps: int = Field(8, ge=1)
    """Validation sample i is evaluated at t = (i mod 8) / 8 (the reference's fixed assignment)."""
    eval_seed: int = Field(2025, ge=0)
    """Seed of the evaluation noise and posterior draws, per validation row: every evaluation of
    every run and layout sees the same noise (the reference draws it afresh: same mean, more noise)."""

    # ---- optimizer and schedule (log keys) ------------------------------------------------------
    opt_name: Literal["adamw"] = "adamw"
    """Logged `opt_name`: torch AdamW (decoupled weight decay)."""
    opt_base_learning_rate: float = Field(2.0e-4, ge=0.0)
    """LR after warmup, constant to the end (RCP at GBS 512: 2e-4)."""
    opt_learning_rate_warmup_steps: int = Field(1600, ge=0)
    """Linear warmup from lr/warmup to the LR, as the reference's (step + 1) / warmup."""
    opt_adamw_beta_1: float = Field(0.9, ge=0.0, lt=1.0)
    """Fixed by the closed rules."""
    opt_adamw_beta_2: float = Field(0.95, ge=0.0, lt=1.0)
    """Fixed by the closed rules."""
    opt_adamw_epsilon: float = Field(1.0e-8, gt=0.0)
    """Fixed by the closed rules."""
    opt_adamw_weight_decay: float = Field(0.1, ge=0.0)
    """Fixed by the closed rules."""
    opt_gradient_clip_norm: float = Field(1.0, gt=0.0)
    """Global gradient-norm clip (fixed: 1.0)."""

    # ---- data, evaluation, stopping -----------------------------------------------------------
    train_samples: int = Field(1_099_776, ge=1)
    """Logged `train_samples`: CC12M images kept by the reference's cleaning (preprocessed)."""
    eval_samples: int = Field(29_696, ge=1)
    """Logged `eval_samples`: COCO-2014 validation samples, 3,712 per timestep."""
    train_dir: str = "cc12m_preprocessed"
    """Folder under the data dir: the preprocessed training set as `datasets.save_to_disk` wrote it
    (state.json + data-*.arrow with __key__, t5_encodings, clip_encodings, mean, logvar)."""
    eval_dir: str = "coco_preprocessed"
    """Folder under the data dir: the preprocessed validation set (the same columns + timestep)."""
    vae_dir: str = "autoencoder"
    """Folder of the 16-channel autoencoder under the data dir. Full size: not read (training reads
    the precomputed moments; the factors are the fields above). Tiny: `prepare`'s VAE, whose config
    gives the shift and scale when vae_shift_factor / vae_scale_factor are null."""
    empty_encodings_dir: str = "empty_encodings"
    """Folder under the data dir with t5_empty.npy and clip_empty.npy (the empty caption's encodings)."""
    eval_every_samples: int = Field(262_144, ge=1)
    """Evaluate every ceil(eval_every_samples / GBS) steps (logged `evaluation_frequency`: the samples)."""
    eval_batch_size: int = Field(16, ge=1)
    """Validation samples per forward per rank."""
    train_samples_cap: int = Field(15_360_000, ge=1)
    """Stop (aborted) after this many training images (the RCPs converge at 7.1M-16.3M; the
    reference caps at 30,000 steps)."""
    checkpoint_interval_steps: int = Field(0, ge=0)
    """Resumable checkpoint (`mlperf run --resume`) at the first evaluation after every N steps; 0 = never."""

    # ---- tiny size: what `prepare` builds -------------------------------------------------------
    tiny_vae_steps: int = Field(150, ge=1)
    """Adam steps that train the tiny 16-channel VAE (factor 2) on the training digits."""

    # ---- optimisation switches (SWITCHES below; the README's switch table) ---------------------
    precision: Literal["fp32", "bf16"] = "bf16"
    """Transformer compute dtype under torch autocast (CUDA or CPU); weights, gradients, AdamW fp32
    (reference: bf16 mixed precision)."""
    fsdp: bool = True
    """FSDP2 (fully_shard per block, then the root) over all ranks; false: DDP replicas. 11.9 B fp32
    weights + AdamW are 190 GB: the full size needs it."""
    activation_checkpointing: bool = True
    """Recompute every block's activations in the backward (diffusers' gradient checkpointing;
    the reference's full activation checkpointing)."""

    SWITCHES: ClassVar[dict[str, Switch]] = {
        "fp8": Switch((), "the FLUX transformer has no FP8 path here (no Transformer Engine layers)"),
        "cuda_graphs": Switch((), "the FLUX step is not captured (no torch.compile path here)"),
        "precision": Switch(("cpu", "gpu"), "", off="fp32"),
        "fsdp": Switch(("cpu", "gpu"), ""),
        "activation_checkpointing": Switch(("cpu", "gpu"), ""),
    }
    SUPPORTS: ClassVar[tuple[str, ...]] = ()  # data parallel (FSDP/DDP) only, as the reference

    @model_validator(mode="after")
    def _check(self):
        if sum(self.axes_dims_rope) != self.attention_head_dim:
            raise ValueError(
                f"axes_dims_rope {self.axes_dims_rope} sum to {sum(self.axes_dims_rope)}, "
                f"attention_head_dim is {self.attention_head_dim}: they must be equal"
            )
        if len(self.axes_dims_rope) != 3 or any(d % 2 for d in self.axes_dims_rope):
            raise ValueError(f"axes_dims_rope {self.axes_dims_rope}: three even numbers (text, row, column)")
        return self

    @property
    def eval_interval_steps(self) -> int:
        return math.ceil(self.eval_every_samples / self.global_batch_size)

    @property
    def evaluation_frequency(self) -> int:
        """Samples between evaluations as the loop does them (logged `evaluation_frequency`)."""
        return self.eval_interval_steps * self.global_batch_size

    @property
    def in_channels(self) -> int:
        return 4 * self.latent_channels  # 2x2 latent patches per token

    def lr_at(self, step: int) -> float:
        """LR of 0-based step `step`: (step + 1) / warmup of the LR during warmup, then constant."""
        w = self.opt_learning_rate_warmup_steps
        return self.opt_base_learning_rate * (min(1.0, (step + 1) / w) if w else 1.0)

    def lowest_precision(self, device: str) -> dict[str, str]:
        """What reference_impls/flux1 builds (the keys: BenchmarkConfig.lowest_precision)."""
        dtype = self.LOG_DTYPE[self.precision]
        return {
            # autocast runs every Linear in `precision`; fp32 on CUDA matmuls stay fp32 (the
            # harness leaves torch.backends.cuda.matmul.allow_tf32 off)
            "linear": dtype,
            # diffusers' Flux attention: SDPA on q/k/v from those Linears
            "attn": dtype,
            # FSDP2 (MixedPrecisionPolicy reduce_dtype fp32) and DDP reduce fp32 gradients; FSDP2
            # all-gathers the parameters in `precision` (param_dtype)
            "comm": dtype if self.fsdp else "fp32",
        }
