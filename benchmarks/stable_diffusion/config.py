"""Typed Stable Diffusion v2 config. Defaults are the reference (full size); configs/tiny.yaml shrinks it.

Closed-rule arithmetic (training_rules v4.0; NVIDIA's `LEARNING_RATE = BASE_LR x GBS`):
    LR              = base_lr_per_image x GBS          e.g. 1e-7 x 512 = 5.12e-5 (logged opt_base_learning_rate)
    checkpoint      = every ceil(512000 / GBS) steps   e.g. GBS 512 -> 1000 steps, GBS 2048 -> 250 steps
    warmup          = 1000 steps (linear from 0), tunable
    AdamW           = (0.9, 0.999), eps 1e-8, weight decay 0.01, fixed
The quality target (FID <= 90 and CLIP >= 0.15 at the same checkpoint) is in benchmark.yaml.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from benchmarks.base import BenchmarkConfig, Switch


class StableDiffusionConfig(BenchmarkConfig):
    global_batch_size: int = Field(512, ge=1)
    """Images per optimizer step across all ranks (logged `global_batch_size`; RCPs at 512, 1024, 2048)."""

    # ---- UNet (diffusers UNet2DConditionModel, SD v2 layout) --------------------------------
    unet_block_out_channels: list[int] = [320, 640, 1280, 1280]
    """Channels per resolution level (SD v2: 320 x (1, 2, 4, 4)). Every level but the last has cross-attention."""
    unet_layers_per_block: int = Field(2, ge=1)
    """ResNet blocks per level (num_res_blocks)."""
    unet_attention_head_dim: list[int] = [5, 10, 20, 20]
    """Attention heads per level, in diffusers' naming (SD v2: 64 channels per head)."""
    unet_norm_num_groups: int = Field(16, ge=1)
    """GroupNorm groups in the UNet: 16, as the MLPerf reference (SD v2 itself uses 32)."""
    cross_attention_dim: int = Field(1024, ge=8)
    """Width of the text embedding the UNet attends to (OpenCLIP ViT-H/14: 1024)."""
    latent_channels: int = Field(4, ge=1)
    """VAE latent channels (the UNet's in/out channels)."""
    latent_size: int = Field(64, ge=2)
    """Latent height = width (512 px images / VAE factor 8 = 64)."""
    vae_scale_factor: float | None = Field(0.18215, gt=0.0)
    """Latents are (sample - vae_shift_factor) x vae_scale_factor. None: read from the tiny VAE's config."""
    vae_shift_factor: float | None = 0.0
    """Subtracted before scaling (SD v2: 0). None: read from the tiny VAE's config."""

    # ---- frozen text encoder ------------------------------------------------------------------
    text_encoder: Literal["openclip-vit-h-14", "tiny-clip"] = "openclip-vit-h-14"
    """Full: OpenCLIP ViT-H/14 (laion2b_s32b_b79k), penultimate layer. Tiny: a fixed-seed CLIPTextModel."""
    text_max_length: int = Field(77, ge=2)
    """Tokens per caption, padded/truncated."""

    # ---- diffusion ----------------------------------------------------------------------------
    num_train_timesteps: int = Field(1000, ge=2)
    """DDPM training timesteps (t drawn uniformly from 0..999)."""
    beta_start: float = Field(0.00085, gt=0.0, lt=1.0)
    """First beta of the scaled-linear schedule."""
    beta_end: float = Field(0.012, gt=0.0, lt=1.0)
    """Last beta: scaled-linear betas 0.00085 -> 0.012 over 1000 DDPM steps."""
    prediction_type: Literal["v_prediction"] = "v_prediction"
    """The UNet predicts v = sqrt(a) eps - sqrt(1 - a) x0 (Salimans & Ho 2022), as SD v2."""

    # ---- optimizer and schedule (log keys) ----------------------------------------------------
    opt_name: Literal["adamw"] = "adamw"
    """Logged `opt_name`; AdamW (or ZeRO-sharded AdamW) is the only optimizer built."""
    base_lr_per_image: float = Field(1.25e-7, gt=0)
    """NVIDIA's BASE_LR: the LR is this times GBS (reference 1.25e-7; NVIDIA records 1e-7, 1.2e-7, 8e-8)."""
    opt_base_learning_rate: float | None = Field(None, ge=0.0)
    """Peak LR after warmup; default base_lr_per_image x global_batch_size."""
    opt_learning_rate_warmup_steps: int = Field(1000, ge=0)
    """Linear warmup from 0 to the peak LR, then constant."""
    opt_adamw_beta_1: float = Field(0.9, ge=0.0, lt=1.0)
    """Fixed by the closed rules."""
    opt_adamw_beta_2: float = Field(0.999, ge=0.0, lt=1.0)
    """Fixed by the closed rules."""
    opt_adamw_epsilon: float = Field(1.0e-8, gt=0.0)
    """Fixed by the closed rules."""
    opt_adamw_weight_decay: float = Field(0.01, ge=0.0)
    """Fixed by the closed rules (decoupled weight decay)."""

    # ---- data, checkpoints, evaluation --------------------------------------------------------
    train_samples: int = Field(6513144, ge=1)
    """Training images (logged `train_samples`): the LAION-400M CC-BY subset as VAE moments."""
    eval_samples: int = Field(30000, ge=1)
    """COCO-2014 validation captions scored per checkpoint (logged `eval_samples`)."""
    train_shards: str = "laion-400m/webdataset-moments-filtered"
    """Folder under the data dir with webdataset tars of `<key>.npy` moments + `<key>.txt` captions."""
    eval_captions: str = "coco2014/val2014_30k.tsv"
    """TSV (image_id, id, caption) of the evaluation prompts, under the data dir."""
    fid_stats: str = "coco2014/val2014_512x512_30k_stats.npz"
    """Reference FID statistics (mu, sigma) of the real evaluation images, under the data dir."""
    sd_checkpoint: str = "checkpoints/sd/512-base-ema.ckpt"
    """Frozen VAE (+ text encoder) weights; tiny: `checkpoints/tiny/vae` written by prepare."""
    vae_config: str = "checkpoints/sd/vae"
    """Folder with the diffusers config.json of the SD v2 VAE (full size: written or checked by
    `prepare`, passed to from_single_file as config= so the VAE loads offline; tiny: unused)."""
    clip_text_checkpoint: str = "checkpoints/clip/open_clip_pytorch_model.bin"
    """OpenCLIP ViT-H/14 weights: the frozen text encoder and the CLIP-score model."""
    inception_checkpoint: str = "checkpoints/inception/pt_inception-2015-12-05-6726825d.pth"
    """FID Inception weights (pytorch-fid). Never downloaded: a missing file is an error."""
    checkpoint_every_images: int = Field(512000, ge=1)
    """Save (and score) a checkpoint every ceil(checkpoint_every_images / GBS) steps."""
    resumable_checkpoint_interval_steps: int = Field(1000, ge=0)
    """Resumable checkpoint (`mlperf run --resume`: UNet, AdamW, grad scaler, data position, RNGs,
    the scoring clock) at the first UNet checkpoint (block boundary) after every N steps; 0 = never.
    (`checkpoint_interval_steps` is already the UNet checkpoint cadence, derived from
    checkpoint_every_images.) Full: 1000, i.e. every checkpoint at GBS 512; tiny: every checkpoint."""
    eval_start_images: int = Field(0, ge=0)
    """Score only checkpoints at or after this many images (NVIDIA's INFER_START_STEP x GBS)."""
    train_samples_cap: int = Field(10_240_000, ge=1)
    """Stop (aborted) after this many images without reaching the target (NVIDIA: CONFIG_MAX_STEPS x GBS)."""
    eval_batch_size: int = Field(32, ge=1)
    """Prompts per sampling batch per rank."""
    sampling_steps: int = Field(50, ge=1)
    """DDIM steps per generated image (reference 50, eta 0)."""
    sampling_timestep_spacing: Literal["leading", "trailing"] = "leading"
    """DDIM timesteps: 'leading' = the reference's uniform 1, 21, ..., 981; 'trailing' starts at 999 (few steps)."""
    guidance_scale: float = Field(8.0, ge=0.0)
    """Classifier-free guidance scale at evaluation (reference 8.0; 1.0 = no guidance)."""
    eval_seed: int = Field(2023, ge=0)
    """Seed of the evaluation noise (the same images for every checkpoint)."""

    # ---- tiny size: what `prepare` builds ----------------------------------------------------
    tiny_vae_steps: int = Field(150, ge=1)
    """Adam steps that train the tiny VAE (factor 2) on the training digits before it encodes them."""
    tiny_classifier_steps: int = Field(300, ge=1)
    """Adam steps that train the tiny digits classifier (the FID/CLIP proxy) on the training digits."""

    # ---- optimisation switches (SWITCHES below; the README's switch table) ------------------
    flash_attention: bool = False
    """UNet attention through PyTorch SDPA's flash kernel only, an error where it cannot run (NVIDIA:
    FLASH_ATTENTION=True); false: PyTorch picks the kernel. CPU: PyTorch's CPU flash kernel."""
    channels_last: bool = False
    """UNet weights and inputs in NHWC memory format (CUDA and CPU convolutions both take it)."""
    distributed_optimizer: bool = False
    """Shard AdamW state over DP ranks (ZeroRedundancyOptimizer over NCCL or gloo; NVIDIA:
    distributed_fused_adam)."""
    precision: Literal["fp32", "fp16", "bf16"] = "fp16"
    """UNet compute dtype under torch autocast (CUDA or CPU), fp16 with a grad scaler (reference:
    fp16 AMP). CPU fp16 runs, but ~6-8x slower than fp32 where the CPU lacks fp16 kernels."""

    SWITCHES: ClassVar[dict[str, Switch]] = {
        "fp8": Switch((), "the UNet has no FP8 path; NVIDIA's v4.0 SD records trained it in fp16"),
        "cuda_graphs": Switch(
            ("gpu",),
            "torch.compile reduce-overhead captures CUDA graphs of CUDA tensors only; on CPU "
            "inductor logs 'skipping cudagraphs due to cpu device' and captures nothing",
            library="triton",
        ),
        "flash_attention": Switch(
            ("cpu", "gpu"), "", needs=("precision",)
        ),  # needs: the CUDA flash kernel has no fp32 path
        "channels_last": Switch(("cpu", "gpu"), ""),
        "distributed_optimizer": Switch(("cpu", "gpu"), ""),
        "precision": Switch(("cpu", "gpu"), "", off="fp32"),
    }
    SUPPORTS: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="after")
    def _derive(self):
        if self.opt_base_learning_rate is None:
            lr = float(f"{self.base_lr_per_image * self.global_batch_size:.6g}")
            object.__setattr__(self, "opt_base_learning_rate", lr)  # frozen model: fill once
        levels = len(self.unet_block_out_channels)
        if levels < 2:
            raise ValueError("unet_block_out_channels needs at least 2 levels")
        if len(self.unet_attention_head_dim) != levels:
            raise ValueError(
                f"unet_attention_head_dim has {len(self.unet_attention_head_dim)} entries for "
                f"{levels} levels in unet_block_out_channels"
            )
        bad = [c for c in self.unet_block_out_channels if c % self.unet_norm_num_groups]
        if bad:
            raise ValueError(
                f"unet_block_out_channels {bad} not divisible by unet_norm_num_groups "
                f"{self.unet_norm_num_groups}"
            )
        if self.latent_size % 2 ** (levels - 1):
            raise ValueError(f"latent_size {self.latent_size} does not halve {levels - 1} times")
        return self

    def lowest_precision(self, device: str) -> dict[str, str]:
        """What reference_impls/stable_diffusion builds (the keys: BenchmarkConfig.lowest_precision)."""
        dtype = self.LOG_DTYPE[self.precision]
        return {
            # model.mixed_precision autocasts the UNet's Linear and Conv2d to fp16/bf16; in fp32 on
            # CUDA its convolutions run TF32 (torch.backends.cudnn.allow_tf32, on by default here).
            "linear": "tf32" if dtype == "fp32" and device.startswith("cuda") else dtype,
            # diffusers' SDPA processor on q/k/v from those Linears (flash_attention only picks the kernel).
            "attn": dtype,
            # torch DDP all-reduces the grads of the fp32 UNet params (autocast leaves them fp32) and
            # ZeroRedundancyOptimizer broadcasts fp32 params.
            "comm": "fp32",
        }

    @property
    def checkpoint_interval_steps(self) -> int:
        return math.ceil(self.checkpoint_every_images / self.global_batch_size)
