"""The FLUX.1 transformer (diffusers FluxTransformer2DModel), its init, latent packing, AdamW.

Full size: FLUX.1-schnell (19 double + 38 single blocks, 24 x 128 heads, no guidance embedding),
11,891,178,560 parameters. The init is the reference's (torchtitan experiments/flux model.py
`init_weights`): Xavier-uniform linears with zero biases, the time/vector MLPs N(0, 0.02), and every
modulation and the final layer zero, so the untrained model predicts velocity 0. torchtitan fuses
q/k/v (and, in single blocks, q/k/v with the MLP's input) in one Linear; diffusers splits them, so
the Xavier bound here is the fused tensor's: sqrt(6 / (fan_in + fused fan_out)).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import torch
from torch import nn


def build(cfg) -> Any:  # diffusers sets attributes at run time: Any at this boundary
    """The transformer with the reference's init (on the current default device: meta works)."""
    from diffusers import FluxTransformer2DModel

    m = FluxTransformer2DModel(
        patch_size=1,
        in_channels=cfg.in_channels,
        num_layers=cfg.num_layers,
        num_single_layers=cfg.num_single_layers,
        attention_head_dim=cfg.attention_head_dim,
        num_attention_heads=cfg.num_attention_heads,
        joint_attention_dim=cfg.joint_attention_dim,
        pooled_projection_dim=cfg.pooled_projection_dim,
        guidance_embeds=False,
        axes_dims_rope=tuple(cfg.axes_dims_rope),
    )
    if m.device.type != "meta":
        init_weights(m)
    if cfg.activation_checkpointing:
        m.enable_gradient_checkpointing()
    return m


def _xavier(linears: list[nn.Linear], fused_out: int) -> None:
    for lin in linears:
        bound = math.sqrt(6.0 / (lin.in_features + fused_out))
        nn.init.uniform_(lin.weight, -bound, bound)


@torch.no_grad()
def init_weights(m) -> None:
    width = m.inner_dim
    for mod in m.modules():
        if isinstance(mod, nn.Linear):
            nn.init.xavier_uniform_(mod.weight)
            if mod.bias is not None:
                nn.init.zeros_(mod.bias)
    for mlp in (m.time_text_embed.timestep_embedder, m.time_text_embed.text_embedder):
        for mod in mlp.modules():
            if isinstance(mod, nn.Linear):
                nn.init.normal_(mod.weight, std=0.02)
    for blk in m.transformer_blocks:  # torchtitan: img_attn.qkv and txt_attn.qkv, [3 d, d] each
        a = blk.attn
        _xavier([a.to_q, a.to_k, a.to_v], 3 * width)
        _xavier([a.add_q_proj, a.add_k_proj, a.add_v_proj], 3 * width)
    for blk in m.single_transformer_blocks:  # torchtitan: linear1 = [q, k, v, mlp_in], [3 d + 4 d, d]
        a = blk.attn
        _xavier([a.to_q, a.to_k, a.to_v, blk.proj_mlp], 3 * width + blk.proj_mlp.out_features)
    for mod in m.modules():  # every modulation (adaLN) Linear, and the final layer: zero
        name = type(mod).__name__
        if name.startswith("AdaLayerNorm") and isinstance(getattr(mod, "linear", None), nn.Linear):
            nn.init.zeros_(mod.linear.weight)
            nn.init.zeros_(mod.linear.bias)
    nn.init.zeros_(m.proj_out.weight)
    nn.init.zeros_(m.proj_out.bias)


def pack(latents: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) -> (B, H/2 x W/2, 4 C): 2x2 patches, channel order (c, ph, pw) as the reference."""
    b, c, h, w = latents.shape
    x = latents.view(b, c, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // 2) * (w // 2), c * 4)


def latents(mean: torch.Tensor, logvar: torch.Tensor, eps: torch.Tensor, shift: float, scale: float):
    """x0: a posterior draw z = mean + exp(logvar / 2) eps, shifted and scaled, packed into tokens."""
    return pack((mean + torch.exp(0.5 * logvar) * eps - shift) * scale)


def flow(model, x0, noise, t, t5, clip, img_ids, txt_ids) -> tuple[torch.Tensor, torch.Tensor]:
    """Rectified flow at times t (B,): (the transformer's velocity at x_t = (1 - t) x0 + t noise,
    the target noise - x0), as the reference's train_step and eval_step both compute them."""
    tv = t.view(-1, 1, 1)
    pred = model(
        hidden_states=(1 - tv) * x0 + tv * noise,
        encoder_hidden_states=t5,
        pooled_projections=clip,
        timestep=t,
        img_ids=img_ids,
        txt_ids=txt_ids,
    ).sample
    return pred.float(), noise - x0


def image_ids(latent_size: int, device) -> torch.Tensor:
    """(tokens, 3) positions (0, row, column) of the packed latent grid."""
    n = latent_size // 2
    ids = torch.zeros(n, n, 3)
    ids[..., 1] = torch.arange(n)[:, None]
    ids[..., 2] = torch.arange(n)[None, :]
    return ids.reshape(n * n, 3).to(device)


def text_ids(length: int, device) -> torch.Tensor:
    return torch.zeros(length, 3, device=device)  # the reference: all text positions 0


def draws(seed: int, keys, shape: tuple[int, ...], evaluation: bool = False):
    """Per sample, from its own generator (seed, key): (posterior noise, flow noise, both of `shape`;
    two uniforms: t and the caption-dropout draw). A training key is the sample's position in the
    run's stream (step x GBS + its place in the global batch), an evaluation key its row: so every
    layout (ranks, micro-batches, FSDP or DDP) and a resumed run draw exactly the same numbers."""
    import numpy as np

    eps, noise, uni = [], [], []
    for k in keys:
        # torch's CPU generator keeps 32 bits of a seed: mix (seed, kind, key) into 32 well-spread bits
        g = torch.Generator().manual_seed(
            int(np.random.SeedSequence([seed, int(evaluation), int(k)]).generate_state(1)[0])
        )
        eps.append(torch.randn(shape, generator=g))
        noise.append(torch.randn(shape, generator=g))
        uni.append(torch.rand(2, generator=g))
    return torch.stack(eps), torch.stack(noise), torch.stack(uni)


def autocast(cfg, device: str):
    """The context of the transformer's forward: autocast to bf16 (CUDA or CPU), or nothing."""
    if cfg.precision == "bf16":
        return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def shard_fsdp(model, mesh, cfg) -> None:
    """FSDP2: one unit per double and single block, then the root; params gathered in the compute
    dtype, gradients reduced in fp32 (the reference's mixed precision)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    dtype = torch.bfloat16 if cfg.precision == "bf16" else torch.float32
    mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    for blk in [*model.transformer_blocks, *model.single_transformer_blocks]:
        fully_shard(blk, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
