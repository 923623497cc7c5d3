"""The SD v2 UNet at full size without the memory: the busiest rank of a layout, on `meta`.

`count(cfg, layout)` builds the UNet with `model.build_unet(cfg)` on the meta device and its
optimizer as train.run does (CPU and GPU alike): torch's ZeroRedundancyOptimizer over AdamW when
`distributed_optimizer` is on (each rank keeps the AdamW state of whole parameters assigned to it,
the largest first, each to the least-loaded rank), else `model.optimizer` (AdamW on every rank), in
a fake world of `layout.world_size` ranks (harness/train/meta.py). The optimizer is stepped once on
meta so its state is really allocated. Weights and gradients are fp32 on every rank (AMP autocasts
the activations; DDP replicas). Not counted: DDP's reduction buckets, which with
`gradient_as_bucket_view=False` (train.run's DDP) hold a second gradient-sized fp32 copy
(torch's DDP cannot be built on meta).
"""

from __future__ import annotations

import torch

from harness.train import meta
from reference_impls.stable_diffusion import model as M


def _rank(cfg, layout, rank: int):
    """(unet, optimizer, AdamW state bytes) as rank `rank`, plus each rank's optimizer parameters."""
    with torch.device("meta"):
        unet = M.build_unet(cfg)
        if cfg.channels_last:  # as train.run (on CPU too)
            unet = unet.to(memory_format=torch.channels_last)
    with meta.fake_world(layout.world_size, rank=rank):
        opt = M.optimizer(cfg, unet.parameters(), sharded=cfg.distributed_optimizer)  # as train.run
        inner = getattr(opt, "optim", opt)  # ZeroRedundancyOptimizer: this rank's AdamW
        meta.first_step(inner, [p for g in inner.param_groups for p in g["params"]])
        if hasattr(opt, "_partition_parameters"):  # ZeRO's assignment of parameters to ranks
            per_rank = [
                sum(p.numel() for g in groups for p in g["params"]) for groups in opt._partition_parameters()
            ]
        else:
            per_rank = [sum(p.numel() for p in unet.parameters())] * layout.world_size
    return unet, inner, per_rank


def count(cfg, layout) -> dict:
    unet, opt, per_rank = _rank(cfg, layout, 0)
    busiest = max(range(len(per_rank)), key=per_rank.__getitem__)
    if busiest != 0:
        unet, opt, per_rank = _rank(cfg, layout, busiest)
    params = list(unet.parameters())
    n = sum(p.numel() for p in params)
    rank = meta.replica_parts(
        params, opt, optimizer_parameters=per_rank[busiest], largest_tensor=max(p.numel() for p in params)
    )
    return {
        "parameters_total": n,
        "parameters_trainable": sum(p.numel() for p in params if p.requires_grad),
        "rank": dict(rank, rank=busiest),
        "optimizer_parameters_per_rank": {
            "max": max(per_rank),
            "min": min(per_rank),
            "mean": n / len(per_rank),
        },
    }


def build_report(cfg, layout, device: str) -> dict:
    """`mlperf run --dry-run --build` (impl.build): the rank with the largest ZeRO optimizer shard
    (weights and gradients are alike on every rank)."""
    c = count(cfg, layout)
    cuda = device.startswith("cuda")
    zero = cfg.distributed_optimizer and layout.world_size > 1
    name = f"rank {c['rank']['rank']} (the largest ZeRO shard)" if zero else "every rank (DDP replica)"
    not_built = []
    if cuda and cfg.cuda_graphs:
        not_built.append(
            "needs a GPU: cuda_graphs (torch.compile reduce-overhead captures at the first step)"
        )
    built = ["channels_last"] if cfg.channels_last else []
    return meta.report(
        c, [meta.shard(name, 1 if zero else layout.world_size, c["rank"])], not_built=not_built, built=built
    )
