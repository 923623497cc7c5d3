"""Stable Diffusion v2's cost model: the diffusers UNet2DConditionModel (SD v2 layout) as
reference_impls/stable_diffusion builds it: fp32 weights and gradients under AMP, AdamW m and v,
split over all ranks by ZeroRedundancyOptimizer (whole tensors: `zero_busiest`) when
`distributed_optimizer` is on. Its evaluation is not forward passes at a cadence: the record
implementations score checkpoints offline (untimed), the harness generates images with the UNet.
"""

from __future__ import annotations

import math
from typing import Any

from benchmarks.costs import Cost, Workload, degrees, replicated_adam_bytes, zero_busiest
from benchmarks.stable_diffusion.config import StableDiffusionConfig

REFERENCE_PARAMS = 865_910_724  # the SD v2 UNet at 64x64x4 latents, which the 0.8 TFLOP estimate is of


def _resnet(c_in: int, c_out: int, temb: int) -> list[int]:
    """ResnetBlock2D: norm1, conv1 (3x3), time_emb_proj, norm2, conv2 (3x3), 1x1 shortcut if needed."""
    out = [c_in, c_in, c_in * c_out * 9, c_out, temb * c_out, c_out, c_out, c_out, c_out * c_out * 9, c_out]
    return out + ([c_in * c_out, c_out] if c_in != c_out else [])


def _transformer(c: int, cross: int) -> list[int]:
    """Transformer2DModel with linear projections: GroupNorm, proj_in, one block, proj_out."""
    attn1 = [c * c] * 3 + [c * c, c]  # q, k, v without bias; out with bias
    attn2 = [c * c, cross * c, cross * c, c * c, c]
    ff = [8 * c * c, 8 * c, 4 * c * c, c]  # GEGLU projection to 2 x 4c, then 4c -> c
    block = [c] * 6 + attn1 + attn2 + ff  # three LayerNorms
    return [c, c, c * c, c] + block + [c * c, c]


def tensors(cfg: StableDiffusionConfig) -> list[int]:
    """Element counts of every UNet tensor (diffusers UNet2DConditionModel, SD v2 layout)."""
    ch = list(cfg.unet_block_out_channels)
    temb, cross, lpb, n = 4 * ch[0], cfg.cross_attention_dim, cfg.unet_layers_per_block, len(ch)
    out = [ch[0] * temb, temb, temb * temb, temb]  # time embedding MLP
    out += [cfg.latent_channels * ch[0] * 9, ch[0]]  # conv_in
    prev = ch[0]
    for i, c in enumerate(ch):  # down: cross-attention on every level but the last
        for j in range(lpb):
            out += _resnet(prev if j == 0 else c, c, temb)
            out += _transformer(c, cross) if i < n - 1 else []
        out += [c * c * 9, c] if i < n - 1 else []  # downsampler
        prev = c
    out += _resnet(ch[-1], ch[-1], temb) + _transformer(ch[-1], cross) + _resnet(ch[-1], ch[-1], temb)
    rev = ch[::-1]
    prev = rev[0]
    for i, c in enumerate(rev):  # up: lpb + 1 ResNets on the skip-concatenated input
        skip_in = rev[min(i + 1, n - 1)]
        for j in range(lpb + 1):
            res_in = prev if j == 0 else c
            out += _resnet(res_in + (skip_in if j == lpb else c), c, temb)
            out += _transformer(c, cross) if i > 0 else []
        out += [c * c * 9, c] if i < n - 1 else []  # upsampler
        prev = c
    return out + [ch[0], ch[0], ch[0] * cfg.latent_channels * 9, cfg.latent_channels]  # norm, conv_out


def count(cfg: StableDiffusionConfig) -> int:
    return sum(tensors(cfg))


class StableDiffusionCost(Cost):
    def parameters(self, cfg: StableDiffusionConfig) -> dict[str, int]:
        n = count(cfg)
        return {"total": n, "trainable": n}

    def rank_bytes(self, cfg: StableDiffusionConfig, layout: Any, device: str = "cuda") -> dict[str, float]:
        sizes = tensors(cfg)
        lay = degrees(layout)
        world = lay["dp"] * lay["cp"] * lay["tp"] * lay["pp"]
        held = zero_busiest(sizes, world) if (cfg.distributed_optimizer and world > 1) else None
        return replicated_adam_bytes(sum(sizes), held)

    def workload(self, cfg: StableDiffusionConfig, size: str) -> Workload:
        # ~0.8 TFLOP forward per image at 64x64x4 latents (estimate; the fitted efficiency absorbs
        # the absolute level), scaled by parameters and latent area for other shapes.
        n = count(cfg)
        fwd = 0.8e12 * (n / REFERENCE_PARAMS) * (cfg.latent_size / 64) ** 2
        return Workload.fully_trained(
            fwd,
            n,
            kind="dp",
            precision="fp16",
            cfg=cfg,
            size=size,
            local_batches=(1, 2, 4, 8, 16, 32, 64, 128),
            act_gib_per_sample=0.75 * (cfg.latent_size / 64) ** 2 * (cfg.unet_block_out_channels[0] / 320),
        )

    def samples_per_rcp_unit(self, gbs: int, ruleset: str) -> float:
        return float(gbs) if ruleset < "4.0.0" else 1.0  # RCPs before 4.0.0 count steps

    def checkpoint_every_steps(self, cfg: StableDiffusionConfig) -> int:
        # checkpoint_interval_steps is the UNet scoring cadence; the resumable one has its own field
        return cfg.resumable_checkpoint_interval_steps or cfg.checkpoint_interval_steps

    def eval_work(
        self, w: Workload, c: Any, hw: Any, samples: float, rate: float
    ) -> tuple[float, float] | None:
        # The record implementations score checkpoints offline (untimed); the harness generates
        # eval_samples images with sampling_steps UNet passes (x2 with guidance) per checkpoint.
        cfg = w.cfg
        if c.impl != "harness":
            return 0.0, 0.0
        every = math.ceil(cfg.checkpoint_every_images / c.gbs) * c.gbs
        n = max(0, samples // every - cfg.eval_start_images // every)
        passes = cfg.sampling_steps * (2 if cfg.guidance_scale != 1.0 else 1)
        return n, cfg.eval_samples / hw.world * passes * w.fwd_flops_per_sample / rate


COST = StableDiffusionCost()
