"""FLUX.1's cost model: diffusers' FluxTransformer2DModel (guidance_embeds off, patch 1) as
reference_impls/flux1 builds it from Flux1Config, trained data parallel: fp32 weights, gradients
and AdamW m, v, split on dim 0 over all ranks by FSDP2 (`fsdp`: fully_shard per block, then the
root; `fsdp_rank0`) or replicated by DDP. The VAE and text encoders are not run (the data holds
their outputs), so the transformer is all the work: its tensors (in module order: the unit test
compares a meta build) and its FLOPs (from the Linear shapes) are counted from the config.
"""

from __future__ import annotations

import math
from typing import Any

from benchmarks.costs import ADAM, BF16, FP32, GIB, Cost, Workload, degrees, fsdp_rank0, replicated_adam_bytes
from benchmarks.flux1.config import Flux1Config

Shape = tuple[int, int]  # (dim 0, elements per dim-0 row): what FSDP2 shards on

# Activation bytes per token per hidden unit per block at 16 bits (Korthikanti et al. 2022: 34 for
# a GPT layer with fused attention). A FLUX block keeps about as much: modulated norms, q/k/v, the
# 4x GELU MLP (both streams in double blocks), the concatenated input of the single blocks' proj_out.
ACT_COEFF = 34


def _lin(o: int, i: int) -> list[Shape]:
    return [(o, i), (o, 1)]  # nn.Linear: weight [out, in], bias [out]


def _double(d: int, hd: int) -> list[Shape]:
    """FluxTransformerBlock, in registration order: norm1, norm1_context (AdaLayerNormZero: 6d),
    attn (q/k RMSNorms, q/k/v/out, the text stream's q/k RMSNorms and q/k/v/out), ff, ff_context."""
    attn = [(hd, 1)] * 2 + _lin(d, d) * 4 + [(hd, 1)] * 2 + _lin(d, d) * 4
    return _lin(6 * d, d) * 2 + attn + (_lin(4 * d, d) + _lin(d, 4 * d)) * 2


def _single(d: int, hd: int) -> list[Shape]:
    """FluxSingleTransformerBlock: norm (3d), proj_mlp (4d), proj_out (attn + MLP -> d), attn
    (q/k RMSNorms, q/k/v; pre_only: no out projection)."""
    return _lin(3 * d, d) + _lin(4 * d, d) + _lin(d, 5 * d) + [(hd, 1)] * 2 + _lin(d, d) * 3


def _parts(cfg: Flux1Config) -> tuple[list[Shape], list[Shape], list[Shape], list[Shape]]:
    """(root tensors before the blocks, one double block, one single block, root tensors after)."""
    d, hd, c = cfg.num_attention_heads * cfg.attention_head_dim, cfg.attention_head_dim, cfg.in_channels
    # time_text_embed: timestep MLP on 256 sinusoidal channels, pooled-CLIP MLP; context_embedder; x_embedder
    head = _lin(d, 256) + _lin(d, d) + _lin(d, cfg.pooled_projection_dim) + _lin(d, d)
    head += _lin(d, cfg.joint_attention_dim) + _lin(d, c)
    tail = _lin(2 * d, d) + _lin(c, d)  # norm_out (AdaLayerNormContinuous), proj_out (out = in channels)
    return head, _double(d, hd), _single(d, hd), tail


def shapes(cfg: Flux1Config) -> list[Shape]:
    head, dbl, sgl, tail = _parts(cfg)
    return head + dbl * cfg.num_layers + sgl * cfg.num_single_layers + tail


def tensors(cfg: Flux1Config) -> list[int]:
    """Element counts of every parameter, in `model.parameters()` order."""
    return [a * b for a, b in shapes(cfg)]


def count(cfg: Flux1Config) -> int:
    return sum(tensors(cfg))


def forward_flops(cfg: Flux1Config) -> dict[str, float]:
    """Forward FLOPs of one sample (2 per multiply-accumulate): 'matmul' from the Linear shapes,
    'attention' QK^T and AV over the joint text + image sequence."""
    d, c = cfg.num_attention_heads * cfg.attention_head_dim, cfg.in_channels
    img, txt = (cfg.latent_size // 2) ** 2, cfg.text_max_length
    seq, blocks = img + txt, cfg.num_layers + cfg.num_single_layers
    # Once per sample: the t and pooled-CLIP embeddings, and every modulation Linear (they act
    # on that embedding, not on tokens): 2 x 6d per double block, 3d per single, 2d out.
    once = 256 * d + 2 * d * d + cfg.pooled_projection_dim * d
    once += d * d * (12 * cfg.num_layers + 3 * cfg.num_single_layers + 2)
    # Per token: T5 states -> d, latents -> d and back. Every block is 12 d^2 MACs per token:
    # double = q, k, v, out + 4d MLP (4 + 8) with each stream its own weights over its own tokens;
    # single = q, k, v + 4d MLP in + (d + 4d) -> d out (3 + 4 + 5) over the concatenated tokens.
    tokens = txt * cfg.joint_attention_dim * d + 2 * img * c * d + blocks * seq * 12 * d * d
    return {"matmul": 2.0 * (once + tokens), "attention": 4.0 * seq * seq * d * blocks}


def act_gib_per_sample(cfg: Flux1Config) -> float:
    """Activation GiB of one training sample (an estimate: ACT_COEFF per token, hidden unit and
    block, scaled to the element size). With activation checkpointing only the block inputs stay
    (the joint hidden states, one element per token and hidden unit), plus one block's full set
    while it is recomputed in the backward."""
    d = cfg.num_attention_heads * cfg.attention_head_dim
    tokens = (cfg.latent_size // 2) ** 2 + cfg.text_max_length
    blocks = cfg.num_layers + cfg.num_single_layers
    elem = BF16 if cfg.precision == "bf16" else FP32
    one_block = ACT_COEFF * elem / 2 * tokens * d
    if cfg.activation_checkpointing:
        return (blocks * tokens * d * elem + one_block) / GIB
    return blocks * one_block / GIB


class Flux1Cost(Cost):
    def parameters(self, cfg: Flux1Config) -> dict[str, int]:
        n = count(cfg)
        return {"total": n, "trainable": n}

    def rank_bytes(self, cfg: Flux1Config, layout: Any, device: str = "cuda") -> dict[str, float]:
        lay = degrees(layout)
        world = lay["dp"] * lay["cp"] * lay["tp"] * lay["pp"]  # data parallel only
        if not (cfg.fsdp and world > 1):
            return replicated_adam_bytes(count(cfg))
        _, n = fsdp_rank0(((d0, r, True) for d0, r in shapes(cfg)), world)
        # FSDP2 all-gathers a block in param_dtype (bf16 under bf16, else fp32) while it runs and
        # prefetches the next; the root's own tensors (embedders, norm_out, proj_out) stay gathered.
        head, dbl, sgl, tail = _parts(cfg)
        size = [sum(a * b for a, b in p) for p in (head + tail, dbl, sgl)]
        biggest = size[1] if cfg.num_layers else size[2]
        gathered = (size[0] + 2 * biggest) * (BF16 if cfg.precision == "bf16" else FP32)
        return {
            "parameters_rank": n,
            "weights": n * FP32,
            "gradients": n * FP32,  # reduced in fp32 (MixedPrecisionPolicy reduce_dtype)
            "optimizer": n * ADAM,
            "fsdp_gathered": gathered,
        }

    def workload(self, cfg: Flux1Config, size: str) -> Workload:
        f = forward_flops(cfg)
        fwd, n = f["matmul"] + f["attention"], count(cfg)
        # backward = 2 x forward; activation checkpointing re-runs every block's forward in it.
        # A 'dp' workload has no recompute term in the time model, so the recompute goes in here.
        train = (4 if cfg.activation_checkpointing else 3) * fwd
        return Workload(
            kind="dp",
            precision="bf16",
            cfg=cfg,
            size=size,
            flops_per_sample=train,
            fwd_flops_per_sample=fwd,
            params=n,
            trainable_params=n,
            local_batches=(1, 2, 4, 8, 16, 32, 64),
            act_gib_per_sample=act_gib_per_sample(cfg),
        )

    def evals(self, w: Workload, samples: float, gbs: int) -> tuple[float, float]:
        # Forward passes over all eval_samples every ceil(eval_every_samples / GBS) steps; the run
        # stops only at an evaluation, so a partial interval still ends in one (none at step 0).
        every = math.ceil(w.cfg.eval_every_samples / gbs) * gbs
        return math.ceil(samples / every), w.cfg.eval_samples

    def samples_per_rcp_unit(self, gbs: int, ruleset: str) -> float:
        return 1.0  # rcps_flux1.json counts samples (images)

    def harness_overrides(self, w: Workload, c: Any) -> dict[str, Any]:
        return {"fsdp": c.fsdp}  # the candidate's sharding, not the config's default

    def checkpoint_every_steps(self, cfg: Flux1Config) -> int:
        # saved at the first evaluation after every N steps: N rounded up to the eval interval
        n, e = cfg.checkpoint_interval_steps, cfg.eval_interval_steps
        return math.ceil(n / e) * e if n else 0


COST = Flux1Cost()
