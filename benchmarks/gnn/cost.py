"""R-GAT's cost model: PyG R-GAT as reference_impls/gnn builds it (one GATConv per edge type per
layer, those that cannot reach the seed papers not built, a final Linear; fp32, DDP replicas, Adam
m and v), plus what sets it apart from a dense model: every sampled node gathers one feature row
from the IGBH feature store, and NVIDIA's record implementation places that store in GPU memory.
"""

from __future__ import annotations

from typing import Any

from benchmarks.costs import GIB, Cost, Workload, replicated_adam_bytes
from benchmarks.gnn.config import IGBH_RELATIONS, GnnConfig

# The IGBH-full feature store (547M nodes x 1024 features, FP8 offline) and its CSC graph.
FEATURE_GIB = 547e6 * 1024 / 2**30
GRAPH_GIB = 5.8e9 * 4 / 2**30
EPOCH_SEEDS = 94_605_581  # IGBH-full training seeds: the RCPs count epochs of them


def convs(cfg: GnnConfig) -> list[int]:
    """GATConvs built per layer (first layer first), walking back from the seed papers, as
    reference_impls/gnn/model.py builds them (one per edge type that can reach a seed paper)."""
    types = set(cfg.num_nodes)
    edges = []
    for s, r, d in IGBH_RELATIONS:
        if s in types and d in types:
            edges.append((s, d))
            if r != "cites":
                edges.append((d, s))
    per_layer, needed = [], {"paper"}
    for _ in range(cfg.num_layers):
        kept = [e for e in edges if e[1] in needed]
        per_layer.append(len(kept))
        needed = {e[0] for e in kept}
    return per_layer[::-1]


def count(cfg: GnnConfig) -> int:
    hid = cfg.hidden_channels
    total = 0
    for i, n in enumerate(convs(cfg)):
        c_in = cfg.in_channels if i == 0 else hid
        total += n * (2 * c_in * hid + 3 * hid)  # lin_src, lin_dst; att_src, att_dst, bias
    return total + hid * cfg.num_classes + cfg.num_classes


def hops(cfg: GnnConfig) -> list[int]:
    """Sampled nodes per seed at each hop (the seed itself first): the fan-out products."""
    out = [1]
    for k in cfg.fan_out:
        out.append(out[-1] * k)
    return out


def placement(hw: Any, k: dict) -> str:
    """Where NVIDIA's DGL implementation puts the feature store: in the GPUs of one node when it
    fits there, spread over all GPUs when only the whole machine holds it, else in host memory
    (v4.0: 1x H100 'cpu', 1x H200 'cuda/node', 8 and 64 nodes 'cuda/global')."""
    store = FEATURE_GIB + GRAPH_GIB
    room = hw.memory_gib * k["gnn_store_fraction"]
    if store / hw.per_node <= room:
        return "node"
    if store / hw.world <= room:
        return "global"
    return "host"


class GnnCost(Cost):
    def parameters(self, cfg: GnnConfig) -> dict[str, int]:
        n = count(cfg)
        return {"total": n, "trainable": n}

    def rank_bytes(self, cfg: GnnConfig, layout: Any, device: str = "cuda") -> dict[str, float]:
        return replicated_adam_bytes(count(cfg))

    def workload(self, cfg: GnnConfig, size: str) -> Workload:
        # Every sampled node is projected in layer 1 (in -> hidden), the inner ones in the later
        # layers; x3 with the backward. The dense part is small: sampling and gathering dominate.
        hop = hops(cfg)
        nodes = sum(hop)
        h = cfg.hidden_channels
        fwd = 2 * nodes * cfg.in_channels * h + 2 * sum(hop[:-1]) * h * h + 2 * sum(hop[:-2]) * h * h
        n = count(cfg)
        return Workload.fully_trained(
            fwd,
            n,
            kind="dp",
            precision="bf16",
            cfg=cfg,
            size=size,
            local_batches=(256, 512, 1024, 2048, 4096),
            act_gib_per_sample=0.002 * (nodes / 916) * (h / 512),
        )

    def evals(self, w: Workload, samples: float, gbs: int) -> tuple[float, float]:
        c = w.cfg
        return samples / c.num_train_seeds * c.evals_per_epoch, c.num_val_seeds

    def samples_per_rcp_unit(self, gbs: int, ruleset: str) -> float:
        return EPOCH_SEEDS

    def policy(self, w: Workload, hw: Any, k: dict, impl: str) -> dict[str, Any]:
        # the harness samples and gathers on the host CPU ('sampler'); the record implementation
        # keeps the store where it fits
        return {"feature_store": "sampler" if impl == "harness" else placement(hw, k)}

    def input_s_per_sample(self, w: Workload, c: Any, hw: Any, k: dict) -> float:
        nodes = sum(hops(w.cfg))
        if c.feature_store == "sampler":  # the harness: host CPU samples and gathers, then one H2D copy
            row = w.cfg.in_channels * (1 if getattr(w.cfg, "fp8_features", False) else 4)
            return nodes * (k["host_sample_s_per_node"] + row / (k["host_gather_gbs"] * 1e9))
        if c.feature_store == "node":
            bw = hw.intra_gbs * 1e9
        elif c.feature_store == "global":
            remote = 1 - 1 / max(1, hw.world // hw.domain)
            bw = 1e9 / (remote / hw.inter_gbs + (1 - remote) / hw.intra_gbs)
        else:
            bw = hw.host_gbs * 1e9
        return nodes * w.cfg.in_channels / (bw * k["gather_eff"])  # FP8 rows: 1 B a feature

    def input_store_bytes(self, w: Workload, c: Any, world: int, per_node: int) -> dict[str, float]:
        if w.size != "full":
            return {}
        store = (FEATURE_GIB + GRAPH_GIB) * GIB
        return {
            "feature_store": {"node": store / per_node, "global": store / world}.get(c.feature_store, 0.0)
        }

    def explain(self, w: Workload, c: Any, hw: Any, k: dict, breakdown: dict) -> list[dict]:
        where = (
            f" (host_sample_s_per_node {k['host_sample_s_per_node']:.4g}, host_gather_gbs {k['host_gather_gbs']:.4g})"
            if c.feature_store == "sampler"
            else f" at gather_eff {k['gather_eff']:.4g}"
        )
        return [
            {
                "term": "gather",
                "formula": f"GBS / world x {sum(hops(w.cfg))} sampled nodes x feature row, store "
                f"'{c.feature_store}'" + where,
                "value": breakdown["gather"],
            }
        ]


COST = GnnCost()
