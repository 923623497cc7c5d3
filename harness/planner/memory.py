"""Memory per accelerator for one candidate layout, in GiB, with the reason when it does not fit.

Transformers (gpt3, llama2_70b_lora), on the busiest pipeline stage (the first: it holds the
embedding and the most in-flight microbatches):
    weights     params_stage x 2 B (bf16; frozen LoRA base too)
    gradients   trainable_stage x 2 B (bf16 buckets of the distributed optimizer) or 4 B (fp32 main grads)
    optimizer   trainable_stage x 12 B (fp32 master, Adam m and v), / DP with the distributed optimizer
    activations coeff x tokens_per_microbatch x hidden / TP bytes per layer (sequence parallel), x the
                layer-microbatches in flight: 1F1B keeps min(GA, PP) microbatches of L/PP layers;
                the interleaved schedule 2(PP-1) + (VP-1)PP + 1 chunks of L/(PP VP) layers
                (Narayanan et al. 2021); FP8 stores linear inputs in 8 bits (x fp8_act_factor)
    logits      tokens x vocab x 4 B / TP on the last stage (counted once)
    framework   CUDA context, NCCL/userbuffers, allocator slack: constant + fraction (efficiency.yaml)
Data-parallel benchmarks: weights + grads + Adam for the (small) model, activations per sample,
and for gnn the share of the IGBH feature store and graph placed in accelerator memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.planner import workloads as W

GIB = 2**30


@dataclass(frozen=True)
class Candidate:
    tp: int = 1
    pp: int = 1
    vp: int = 1
    cp: int = 1
    mbs: int = 1
    gbs: int = 1
    recompute: str = "none"
    distributed_optimizer: bool = True
    fp8: bool = True
    tp_comm_overlap: bool = True
    fsdp: bool = False
    """Frozen/base weights sharded over all DP x CP ranks and gathered layer by layer (torch FSDP)."""
    feature_store: str = ""
    """gnn: where the features live: 'node' (GPU memory of one node), 'global' (spread over all
    accelerators), 'host' (host memory, read over PCIe)."""

    def dp(self, world: int) -> int:
        return world // (self.tp * self.pp * self.cp)

    def ga(self, world: int) -> int:
        return self.gbs // (self.dp(world) * self.mbs)

    def key(self) -> tuple:
        return (self.tp, self.pp, self.vp, self.cp, self.mbs, self.gbs, self.recompute)


def in_flight_layer_microbatches(w: W.Workload, c: Candidate, ga: int) -> float:
    if c.pp == 1:
        return w.layers
    if c.vp == 1:
        return w.layers / c.pp * min(ga, c.pp)
    chunks = min(ga * c.vp, 2 * (c.pp - 1) + (c.vp - 1) * c.pp + 1)
    return w.layers / (c.pp * c.vp) * chunks


def transformer(w: W.Workload, c: Candidate, world: int, k: dict) -> dict:
    dp, ga = c.dp(world), c.ga(world)
    stage = w.params_per_stage(c.tp, c.pp)
    trainable = stage if w.trainable_params >= w.params else w.trainable_params / (c.tp * c.pp)
    shard = dp if (c.distributed_optimizer and dp > 1) else 1
    grad_b = 2 if c.distributed_optimizer else 4
    rc = w.recompute[c.recompute]
    tokens = c.mbs * w.seq / c.cp
    per_layer = rc.act_coeff * tokens * w.hidden / c.tp * (w.fp8_act_factor if c.fp8 else 1.0)
    acts = per_layer * in_flight_layer_microbatches(w, c, ga)
    if c.recompute == "full":  # plus one layer's full working set during its recomputation
        acts += w.recompute["none"].act_coeff * tokens * w.hidden / c.tp
    weights = stage * 2
    if c.fsdp:  # a 1/(DP x CP) shard, plus the current and the prefetched layer gathered in full
        weights = stage * 2 / (dp * c.cp) + 2 * (w.params / w.layers) * 2 / c.tp
    out = {
        "weights": weights,
        "gradients": trainable * grad_b,
        "optimizer": trainable * 12 / shard,
        "activations": acts,
        "logits": tokens * w.vocab * 4 / c.tp,
    }
    return _finish(out, k)


def data_parallel(w: W.Workload, c: Candidate, world: int, k: dict, per_node: int, nodes: int) -> dict:
    dp = world
    out = {
        "weights": w.params * 2,
        "gradients": w.params * 4,
        "optimizer": w.params * 12 / (dp if c.distributed_optimizer else 1),
        "activations": c.mbs * w.act_gib_per_sample * GIB,
    }
    if w.name == "gnn":
        store = (W.GNN_FEATURE_GIB + W.GNN_GRAPH_GIB) * GIB
        out["feature_store"] = {"node": store / per_node, "global": store / world, "host": 0.0}[
            c.feature_store
        ]
    return _finish(out, k)


def _finish(out: dict, k: dict) -> dict:
    used = sum(out.values())
    out["framework"] = k["memory_overhead_gib"] * GIB + k["memory_slack"] * used
    return {name: v / GIB for name, v in out.items()}


def estimate(w: W.Workload, c: Candidate, hw, k: dict) -> dict:
    """GiB per accelerator by component (sum = total)."""
    if w.kind == "transformer":
        return transformer(w, c, hw.world, k)
    return data_parallel(w, c, hw.world, k, hw.per_node, hw.nodes)


def gnn_placement(hw, k: dict) -> str:
    """Where NVIDIA's DGL implementation puts the feature store: in the GPUs of one node when it
    fits there, spread over all GPUs when only the whole machine holds it, else in host memory
    (v4.0: 1x H100 'cpu', 1x H200 'cuda/node', 8 and 64 nodes 'cuda/global')."""
    store = W.GNN_FEATURE_GIB + W.GNN_GRAPH_GIB
    room = hw.memory_gib * k["gnn_store_fraction"]
    if store / hw.per_node <= room:
        return "node"
    if store / hw.world <= room:
        return "global"
    return "host"
