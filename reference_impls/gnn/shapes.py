"""R-GAT at IGBH-full width on `meta`: parameters and what every (DDP replica) rank holds.

`count(cfg, layout)` builds the model as train.run does (`RGAT` over `data.edge_types` of the
config's node types) on the meta device and steps torch's Adam once there so its moments are
really allocated. Every rank holds the whole model: fp32 weights and gradients (`amp` autocasts
the activations only), Adam's two fp32 moments. Not counted: DDP's reduction buckets (a second
gradient-sized fp32 copy with train.run's `gradient_as_bucket_view=False`).
"""

from __future__ import annotations

import torch

from harness.train import meta
from reference_impls.gnn.model import RGAT


def build(cfg) -> RGAT:
    with torch.device("meta"):
        return RGAT.from_config(cfg)  # the training's own constructor


def count(cfg, layout) -> dict:
    model = build(cfg)
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=cfg.opt_base_learning_rate)  # as train.run
    meta.first_step(opt, params)
    n = sum(p.numel() for p in params)
    rank = meta.replica_parts(params, opt, convs_per_layer=[len(conv.convs) for conv in model.convs])
    return {"parameters_total": n, "parameters_trainable": n, "rank": dict(rank, rank=0)}


def build_report(cfg, layout, device: str) -> dict:
    """`mlperf run --dry-run --build` (impl.build): every rank holds the same replica."""
    c = count(cfg, layout)
    return meta.report(c, [meta.shard("every rank (DDP replica)", layout.world_size, c["rank"])])
