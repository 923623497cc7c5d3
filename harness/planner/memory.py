"""Memory per accelerator for one candidate layout, in GiB by part (the busiest rank).

weights, gradients, optimizer (and what else it holds, e.g. gathered shards) come from the
benchmark's cost model for the harness's own implementation (`impl='harness'`: exactly the dtypes
and sharding it uses; `harness_config` is its config with the candidate's values); for the record
implementations (`impl='record'`, NVIDIA's and the others' published code) from the usual Megatron
accounting: bf16 weights, bf16 grads with the distributed optimizer (fp32 without), fp32 master +
Adam moments (12 B) divided over DP x CP.
activations  coeff x tokens_per_microbatch x hidden / TP bytes per layer (sequence parallel), x the
             layer-microbatches in flight: 1F1B keeps min(GA, PP) microbatches of L/PP layers; the
             interleaved schedule 2(PP-1) + (VP-1)PP + 1 chunks of L/(PP VP) layers (Narayanan et
             al. 2021); FP8 stores linear inputs in 8 bits (x fp8_act_factor)
logits       tokens x vocab x 4 B / TP on the last stage (counted once)
framework    CUDA context, NCCL/userbuffers, allocator slack: constant + fraction (efficiency.yaml)
Data-parallel benchmarks: the model's weights/grads/Adam, activations per sample, and the input
store the cost model places in accelerator memory, if any (`input_store_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.costs import Workload

GIB = 2**30


@dataclass(frozen=True)
class Candidate:
    tp: int = 1
    pp: int = 1
    vp: int = 1
    cp: int = 1
    ep: int = 1
    """Expert parallelism: the routed experts over EP ranks carved out of TP x CP x DP."""
    mbs: int = 1
    gbs: int = 1
    recompute: str = "none"
    distributed_optimizer: bool = True
    fp8: bool = True
    """FP8 matmuls (only where the chip, the stack and the benchmark have them)."""
    tp_comm_overlap: bool = True
    fsdp: bool = False
    """Weights sharded over all DP x CP ranks and gathered layer by layer (FSDP2, ZeRO-3)."""
    feature_store: str = ""
    """Where the benchmark's input store lives, as its cost model places it (`policy`), e.g.
    'node', 'global', 'host', 'sampler'; '' for a benchmark without one."""
    impl: str = "record"
    """'record' (the published implementations) or 'harness' (this project's)."""

    def dp(self, world: int) -> int:
        return world // (self.tp * self.pp * self.cp)

    def ga(self, world: int) -> int:
        return self.gbs // (self.dp(world) * self.mbs)

    def key(self) -> tuple:
        return (self.tp, self.pp, self.vp, self.cp, self.ep, self.mbs, self.gbs, self.recompute)


def in_flight_layer_microbatches(w: Workload, c: Candidate, ga: int) -> float:
    if c.pp == 1:
        return w.layers
    if c.vp == 1:
        return w.layers / c.pp * min(ga, c.pp)
    chunks = min(ga * c.vp, 2 * (c.pp - 1) + (c.vp - 1) * c.pp + 1)
    return w.layers / (c.pp * c.vp) * chunks


class _Overlay:
    """The workload's config seen with the candidate's values (a cheap stand-in for a copy)."""

    def __init__(self, cfg, **over):
        self._cfg, self._over = cfg, over

    def __getattr__(self, name):
        over = self.__dict__.get("_over", {})
        return over[name] if name in over else getattr(self.__dict__["_cfg"], name)


def harness_config(w: Workload, c: Candidate):
    """The workload's config with the candidate's layout (what the harness would run)."""
    over = {
        "tensor_model_parallel_size": c.tp,
        "pipeline_model_parallel_size": c.pp,
        "virtual_pipeline_model_parallel_size": c.vp,
        "context_parallel_size": c.cp,
        "micro_batch_size": c.mbs,
    }
    if w.moe is not None:
        over["expert_model_parallel_size"] = c.ep
    over.update(w.cost.harness_overrides(w, c))
    return _Overlay(w.cfg, **over)


def _model_bytes(w: Workload, c: Candidate, world: int, device: str) -> dict:
    dp = c.dp(world)
    if c.impl == "harness":
        lay = {"tp": c.tp, "pp": c.pp, "vp": c.vp, "cp": c.cp, "dp": dp, "ep": c.ep}
        out = dict(w.cost.rank_bytes(harness_config(w, c), lay, device))
        out.pop("parameters_rank", None)
        return out
    if w.kind == "dp":
        return {"weights": w.params * 2, "gradients": w.params * 4, "optimizer": w.params * 12 / world}
    stage = w.params_per_stage(c.tp, c.pp)
    trainable = stage if w.trainable_params >= w.params else w.trainable_params / (c.tp * c.pp)
    shard = dp * c.cp if (c.distributed_optimizer and dp * c.cp > 1) else 1
    out = {
        "weights": stage * 2,
        "gradients": trainable * (2 if c.distributed_optimizer else 4),
        "optimizer": trainable * 12 / shard,
    }
    if w.moe is not None:  # routed experts: E / EP whole experts per rank, state over TP x CP x DP / EP
        experts = w.moe.expert_params_rank(c.pp, c.ep)
        out["weights"] += experts * 2
        out["gradients"] += experts * (2 if c.distributed_optimizer else 4)
        eshard = c.tp * c.cp * dp // c.ep if c.distributed_optimizer else 1
        out["optimizer"] += experts * 12 / max(1, eshard)
    if c.fsdp:  # ZeRO-3: a 1/(DP x CP) shard, plus the running and the prefetched layer in full
        out["weights"] = stage * 2 / (dp * c.cp)
        out["fsdp_gathered"] = 2 * (w.params / w.layers) * 2 / c.tp
    return out


def model_parallel(w: Workload, c: Candidate, world: int, k: dict, device: str = "cuda", model=None) -> dict:
    ga = c.ga(world)
    rc = w.recompute[c.recompute]
    tokens = c.mbs * w.seq / c.cp
    per_layer = rc.act_coeff * tokens * w.hidden / c.tp * (w.fp8_act_factor if c.fp8 else 1.0)
    acts = per_layer * in_flight_layer_microbatches(w, c, ga)
    if c.recompute == "full":  # plus one layer's full working set during its recomputation
        acts += w.recompute["none"].act_coeff * tokens * w.hidden / c.tp
    out = dict(model or _model_bytes(w, c, world, device))
    out["activations"] = acts
    out["logits"] = tokens * w.vocab * 4 / c.tp
    return _finish(out, k)


def data_parallel(
    w: Workload, c: Candidate, world: int, k: dict, per_node: int, device: str = "cuda"
) -> dict:
    out = _model_bytes(w, c, world, device)
    out["activations"] = c.mbs * w.act_gib_per_sample * GIB
    out.update(w.cost.input_store_bytes(w, c, world, per_node))
    return _finish(out, k)


def _finish(out: dict, k: dict) -> dict:
    used = sum(out.values())
    out["framework"] = k["memory_overhead_gib"] * GIB + k["memory_slack"] * used
    return {name: v / GIB for name, v in out.items()}


def model_bytes(w: Workload, c: Candidate, hw) -> dict:
    """Weights, gradients, optimizer (bytes): the same for every recompute mode of a layout."""
    return _model_bytes(w, c, hw.world, "cpu" if hw.kind == "cpu" else "cuda")


def estimate(w: Workload, c: Candidate, hw, k: dict, model: dict | None = None) -> dict:
    """GiB per accelerator by component (sum = total); `model`: model_bytes() if known."""
    device = "cpu" if hw.kind == "cpu" else "cuda"
    if hw.kind == "cpu":  # gloo on CPU: no CUDA context or userbuffers
        k = {**k, "memory_overhead_gib": 0.3}
    if w.kind == "model_parallel":
        return model_parallel(w, c, hw.world, k, device, model)
    return data_parallel(w, c, hw.world, k, hw.per_node, device)


def with_recompute(c: Candidate, rc: str) -> Candidate:
    """`replace(c, recompute=rc)` without dataclass re-initialisation (a search makes thousands)."""
    if c.recompute == rc:
        return c
    out = object.__new__(Candidate)
    out.__dict__.update(c.__dict__, recompute=rc)
    return out


def memory_key(w: Workload, c: Candidate, world: int) -> tuple:
    """What memory depends on: the layout and, through the microbatches in flight, GA up to the
    pipeline's depth (so the GBS variants of a layout share one estimate)."""
    ga = c.ga(world)
    if c.pp == 1:
        flight = 1
    elif c.vp == 1:
        flight = min(ga, c.pp)
    else:
        flight = min(ga * c.vp, 2 * (c.pp - 1) + (c.vp - 1) * c.pp + 1)
    return (c.tp, c.pp, c.vp, c.cp, c.ep, c.mbs, flight)
