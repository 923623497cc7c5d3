"""The FLUX.1 transformer at full size without the memory: rank 0 of the layout, on `meta`.

`count(cfg, layout)` goes through `train.build`'s steps with model.build (diffusers
FluxTransformer2DModel, activation checkpointing) and, where `fsdp` and several ranks,
`fully_shard` per double/single block and the root over a fake world of `layout.world_size` ranks
(harness/train/meta.py); without FSDP every rank holds a DDP replica. Rank 0 is the busiest: FSDP2
gives each rank ceil(rows / world) rows of every tensor. Weights, gradients and AdamW's moments are
fp32 (autocast / FSDP's param_dtype cast only the compute); AdamW is stepped once on meta so its
state is really allocated. Not counted: DDP's gradient buckets (DDP cannot be built on meta).
"""

from __future__ import annotations

import torch

from harness.train import meta
from harness.train.adamw import adamw
from reference_impls.flux1 import model as M


def build(cfg, layout):
    """The model as rank 0 builds it (call inside `meta.fake_world`)."""
    with torch.device("meta"):
        model = M.build(cfg)
    if cfg.fsdp and layout.world_size > 1:
        from torch.distributed.device_mesh import init_device_mesh

        M.shard_fsdp(model, init_device_mesh("cpu", (layout.world_size,), mesh_dim_names=("dp",)), cfg)
    return model


def count(cfg, layout) -> dict:
    with meta.fake_world(layout.world_size, rank=0):
        model = build(cfg, layout)
        params = list(model.parameters())
        opt = adamw(cfg, params)  # as train.run (state shapes)
        meta.first_step(opt, params)
        dtype = torch.bfloat16 if cfg.precision == "bf16" else torch.float32
        block = max(
            (*model.transformer_blocks, *model.single_transformer_blocks),
            key=lambda b: sum(p.numel() for p in b.parameters()),
        )
        rank = meta.rank_parts(
            parameters=meta.numel(params),
            weights=meta.nbytes(params),
            gradients=meta.nbytes(params),
            optimizer=meta.state_bytes(opt),
            trainable=meta.numel(params),
            dtypes=sorted({str(p.dtype) for p in params}),
            block_gathered=sum(p.numel() for p in block.parameters()) * dtype.itemsize,
        )
    n = sum(p.numel() for p in params)  # a DTensor's numel is its global size
    return {"parameters_total": n, "parameters_trainable": n, "rank": dict(rank, rank=0)}


def build_report(cfg, layout, device: str) -> dict:
    """`mlperf run --dry-run --build` (impl.build): rank 0's FSDP2 shard or a DDP replica."""
    c = count(cfg, layout)
    sharded = cfg.fsdp and layout.world_size > 1
    name = "rank 0 (FSDP2 shard)" if sharded else "every rank (DDP replica)"
    built = ["activation checkpointing"] if cfg.activation_checkpointing else []
    return meta.report(c, [meta.shard(name, layout.world_size, c["rank"])], built=built)
