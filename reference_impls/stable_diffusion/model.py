"""The SD v2 pieces: UNet (trained), frozen VAE and text encoder, noise schedules, AdamW.

Full size: diffusers `UNet2DConditionModel` in the SD v2 layout (320 x (1, 2, 4, 4), 2 ResNets per
level, linear-projection transformers, cross-attention to 1024-wide OpenCLIP ViT-H/14 penultimate
states, GroupNorm 16 as the MLPerf reference), v-prediction on 64x64x4 latents, DDPM 1000 steps with
scaled-linear betas 0.00085 -> 0.012. The VAE and text encoder come from local files only.
Tiny size: the same classes, small (configs/tiny.yaml); the VAE, a word-level tokenizer and a
fixed-seed `CLIPTextModel` are written by `prepare`.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import torch

from harness.core.errors import ConfigError
from reference_impls import tiny_images
from reference_impls.tiny_images import TinyTokenizer

UNCOND = ""  # the empty prompt: classifier-free guidance's unconditional branch


def build_unet(cfg) -> Any:  # diffusers sets attributes at run time: Any at this boundary
    from diffusers import UNet2DConditionModel

    levels = len(cfg.unet_block_out_channels)
    # SD v2: cross-attention at every level but the lowest resolution.
    down = ("CrossAttnDownBlock2D",) * (levels - 1) + ("DownBlock2D",)
    up = ("UpBlock2D",) + ("CrossAttnUpBlock2D",) * (levels - 1)
    unet = UNet2DConditionModel(
        sample_size=cfg.latent_size,
        in_channels=cfg.latent_channels,
        out_channels=cfg.latent_channels,
        layers_per_block=cfg.unet_layers_per_block,
        block_out_channels=tuple(cfg.unet_block_out_channels),
        down_block_types=down,
        up_block_types=up,
        cross_attention_dim=cfg.cross_attention_dim,
        attention_head_dim=tuple(cfg.unet_attention_head_dim),
        use_linear_projection=True,
        norm_num_groups=cfg.unet_norm_num_groups,
    )
    if cfg.flash_attention:
        unet.set_attn_processor(_flash_only())
    return unet


def _flash_only():
    """diffusers' SDPA attention processor restricted to PyTorch's flash kernel. PyTorch already
    prefers flash where it can run, so only the restriction changes anything: where flash cannot
    run (fp32 on CUDA, an unsupported GPU or head size) SDPA raises instead of falling back."""
    from diffusers.models.attention_processor import AttnProcessor2_0
    from torch.nn.attention import SDPBackend, sdpa_kernel

    class FlashOnly(AttnProcessor2_0):
        def __call__(self, attn, hidden_states, *args, **kwargs):
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return super().__call__(attn, hidden_states, *args, **kwargs)

    return FlashOnly()


def noise_scheduler(cfg) -> Any:  # (alphas_cumprod and the rest: set by __init__ at run time)
    from diffusers import DDPMScheduler

    return DDPMScheduler(
        num_train_timesteps=cfg.num_train_timesteps,
        beta_schedule="scaled_linear",
        beta_start=cfg.beta_start,
        beta_end=cfg.beta_end,
        prediction_type=cfg.prediction_type,
    )


def sampler(cfg) -> Any:  # DDIMScheduler.from_config is typed as returning a tuple too
    from diffusers import DDIMScheduler

    return DDIMScheduler.from_config(
        noise_scheduler(cfg).config,
        timestep_spacing=cfg.sampling_timestep_spacing,
        steps_offset=1 if cfg.sampling_timestep_spacing == "leading" else 0,
    )


def optimizer(cfg, params, sharded: bool = False):
    """AdamW with the config's hyperparameters; `sharded` (the distributed_optimizer switch): torch's
    ZeroRedundancyOptimizer over it, each rank keeping the AdamW state of the parameters assigned
    to it (whole tensors, the largest first, each to the least-loaded rank)."""
    kw = dict(
        lr=cfg.opt_base_learning_rate,
        betas=(cfg.opt_adamw_beta_1, cfg.opt_adamw_beta_2),
        eps=cfg.opt_adamw_epsilon,
        weight_decay=cfg.opt_adamw_weight_decay,
    )
    if sharded:
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW, **kw)
    return torch.optim.AdamW(params, **kw)


def mixed_precision(cfg, device: str):
    """(autocast context factory, grad scaler or None) for `precision`, on the device's kind:
    torch autocast and GradScaler take "cpu" as well as "cuda" (fp16 needs the scaler: its
    gradients underflow without loss scaling; bf16 has fp32's exponent range and needs none)."""
    kind = torch.device(device).type
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(cfg.precision)
    if dtype is None:
        return contextlib.nullcontext, None
    scaler = torch.amp.GradScaler(kind) if cfg.precision == "fp16" else None
    return (lambda: torch.autocast(kind, dtype=dtype)), scaler


def lr_at(cfg, step: int) -> float:
    """Linear warmup from 0 over opt_learning_rate_warmup_steps, then constant (the reference's schedule)."""
    w = cfg.opt_learning_rate_warmup_steps
    return cfg.opt_base_learning_rate * (min(1.0, step / w) if w else 1.0)


def _need(path: Path, what: str, origin: str) -> Path:
    if not path.exists():
        raise ConfigError(f"{path}: missing {what} ({origin})")
    return path


TINY_ORIGIN = (
    "run `mlperf prepare stable_diffusion --size tiny` or python -m reference_impls.stable_diffusion.prepare"
)


def latent_factors(cfg, data_dir: str) -> tuple[float, float]:
    """(shift, scale) with latents = (sample - shift) x scale; tiny reads them from the prepared VAE config."""
    return tiny_images.vae_factors(
        cfg.vae_shift_factor, cfg.vae_scale_factor, Path(data_dir) / cfg.sd_checkpoint, TINY_ORIGIN
    )


def load_vae(cfg, data_dir: str):
    """The frozen VAE (only its decoder is used: training reads precomputed moments)."""
    from diffusers import AutoencoderKL

    path = Path(data_dir) / cfg.sd_checkpoint
    if cfg.text_encoder == "tiny-clip":
        _need(path / "config.json", "tiny VAE", TINY_ORIGIN)
        vae = AutoencoderKL.from_pretrained(path)
    else:
        _need(
            path,
            "Stable Diffusion checkpoint (VAE)",
            "512-base-ema.ckpt from stabilityai/stable-diffusion-2-base; mlcommons/training "
            "stable_diffusion/scripts/checkpoints/download_sd.sh",
        )
        conf = _need(
            Path(data_dir) / cfg.vae_config / "config.json",
            "diffusers config of the SD v2 VAE",
            "run `mlperf prepare stable_diffusion --size full`; see vae_config.py",
        )
        try:  # config=: read locally, never the hub cache (vae_config.py)
            vae = AutoencoderKL.from_single_file(str(path), config=str(conf.parent), local_files_only=True)
        except Exception as e:  # noqa: BLE001 - diffusers raises many types; one line for the user
            raise ConfigError(
                f"{path}: cannot load the SD v2 VAE offline ({type(e).__name__}: "
                f"{str(e).splitlines()[0][:200]})"
            ) from None
    return vae.eval().requires_grad_(False)


class TextEncoder(torch.nn.Module):
    """Frozen caption encoder: penultimate-layer states through the final LayerNorm (B, T, cross_attention_dim)."""

    def __init__(self, cfg, data_dir: str):
        super().__init__()
        path = Path(data_dir) / cfg.clip_text_checkpoint
        self.kind = cfg.text_encoder
        if self.kind == "tiny-clip":
            from transformers import CLIPTextModel

            vocab = json.loads(
                _need(path / "vocab.json", "tiny text encoder vocabulary", TINY_ORIGIN).read_text()
            )
            self.tokenize = TinyTokenizer(vocab, cfg.text_max_length)
            self.model = CLIPTextModel.from_pretrained(path)
        else:
            _need(
                path,
                "OpenCLIP ViT-H/14 weights",
                "laion2b_s32b_b79k open_clip_pytorch_model.bin; mlcommons/training "
                "stable_diffusion/scripts/checkpoints/download_clip.sh",
            )
            try:
                import open_clip
            except ImportError:
                raise ConfigError(
                    "full-size stable_diffusion needs the open_clip package on the GPU host "
                    "(pip install open-clip-torch) for the ViT-H/14 text encoder"
                ) from None
            model, _, _ = open_clip.create_model_and_transforms("ViT-H-14", pretrained=str(path))
            del model.visual
            self.model = model
            self.tokenize = open_clip.get_tokenizer("ViT-H-14")
        self.eval().requires_grad_(False)

    @torch.no_grad()
    def forward(self, captions: list[str]) -> torch.Tensor:
        dev = next(self.model.parameters()).device
        ids = self.tokenize(list(captions)).to(dev)
        if self.kind == "tiny-clip":
            # As the reference's FrozenOpenCLIPEmbedder: the penultimate layer, then the final LayerNorm.
            hidden = self.model(ids, output_hidden_states=True).hidden_states[-2]
            return self.model.final_layer_norm(hidden)
        m = self.model  # open_clip: run the transformer and stop one block early (penultimate layer)
        x = m.token_embedding(ids) + m.positional_embedding
        x = x.permute(1, 0, 2) if not getattr(m.transformer, "batch_first", False) else x
        for blk in m.transformer.resblocks[:-1]:
            x = blk(x, attn_mask=m.attn_mask)
        x = x.permute(1, 0, 2) if not getattr(m.transformer, "batch_first", False) else x
        return m.ln_final(x)
