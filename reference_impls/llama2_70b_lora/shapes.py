"""Llama 2 70B + LoRA at full size without the memory: rank 0 of the layout's FSDP2 world, on `meta`.

`count(cfg, layout)` goes through `train.build`'s steps for a sharded run with the model builders
it uses (model.py): the fused-QKV base built on meta and cast to `precision`, peft LoRA on
`lora_target_modules` (adapters in fp32), activation checkpointing, `fully_shard` per decoder layer
over the DP x CP mesh (train.Mesh's shape) of a fake world of `layout.world_size` ranks
(harness/train/meta.py). Loading the checkpoint and fp8 (torchao, CUDA only; the same bf16
weights) are what it leaves out. Rank 0 is the busiest: FSDP2 gives each rank ceil(rows / world)
rows of every tensor, the last ranks what is left.

Holdings: weights are the rank's shards of every parameter; gradients and AdamW's moments exist
only for the trainable adapters, shaped like their shards (FSDP2 reduce-scatters into the sharded
gradient; AdamW is stepped once on meta so its state is really allocated).
"""

from __future__ import annotations

import torch

from harness.train import meta
from reference_impls.llama2_70b_lora import model as M


def build(cfg, layout):
    """The sharded LoRA model as rank 0 builds it (call inside `meta.fake_world`)."""
    from torch.distributed.device_mesh import init_device_mesh

    dtype = torch.bfloat16 if cfg.precision == "bf16" else torch.float32
    base = M.build_base(cfg, "meta")
    base.to(dtype)
    model = M.apply_lora(base, cfg)
    if cfg.activation_checkpointing:
        M.enable_activation_checkpointing(model)
    if cfg.fsdp and layout.world_size > 1:  # train.Mesh: DP x CP, FSDP over both
        mesh = init_device_mesh(
            "cpu", (layout.world_size // layout.cp, layout.cp), mesh_dim_names=("dp", "cp")
        )
        M.shard_fsdp(model, mesh._flatten("dp_cp") if layout.cp > 1 else mesh["dp"], dtype)
    return model


def _decoder_layer_bytes(model, dtype) -> int:
    """One decoder layer gathered whole in `dtype` (FSDP2's all-gather output for one unit)."""
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    layer = next(m for m in model.modules() if isinstance(m, LlamaDecoderLayer))
    return sum(p.numel() for p in layer.parameters()) * dtype.itemsize


def count(cfg, layout) -> dict:
    with meta.fake_world(layout.world_size, rank=0):
        model = build(cfg, layout)
        params = list(model.parameters())
        trainable = [p for p in params if p.requires_grad]
        opt = torch.optim.AdamW(trainable, lr=cfg.opt_base_learning_rate)  # as train.run (state shapes)
        meta.first_step(opt, trainable)
        full = sum(p.numel() for p in params)  # a DTensor's numel is its global size
        full_trainable = sum(p.numel() for p in trainable)
        gathered = _decoder_layer_bytes(model, torch.bfloat16 if cfg.precision == "bf16" else torch.float32)
        rank = meta.rank_parts(
            parameters=meta.numel(params),
            weights=meta.nbytes(params),
            gradients=meta.nbytes(trainable),
            optimizer=meta.state_bytes(opt),
            trainable=meta.numel(trainable),
            dtypes=sorted({str(p.dtype) for p in params}),
            decoder_layer_gathered=gathered,
        )
    return {
        "parameters_total": full,
        "parameters_trainable": full_trainable,
        "trainable_share": full_trainable / full,
        "rank": dict(rank, rank=0),
        "off": sorted(k for k in ("fp8",) if getattr(cfg, k)),
    }


def build_report(cfg, layout, device: str) -> dict:
    """`mlperf run --dry-run --build` (impl.build): rank 0's FSDP2 shard, alike on every rank up
    to the last rows of each tensor."""
    import importlib.util

    c = count(cfg, layout)
    sharded = cfg.fsdp and layout.world_size > 1
    name = "rank 0 (FSDP2 shard over DP x CP)" if sharded else "every rank (whole model)"
    not_built = []
    if cfg.fp8:
        lib = "torchao is not installed" if importlib.util.find_spec("torchao") is None else "needs CUDA"
        not_built.append(f"{lib}: fp8 (float8 base linears; bf16 linears built)")
    built = ["activation checkpointing"] if cfg.activation_checkpointing else []
    return meta.report(c, [meta.shard(name, layout.world_size, c["rank"])], not_built=not_built, built=built)
