"""Step time and time-to-train for one candidate layout (seconds).

    compute   GBS x FLOPs/sample x (1 + recompute) / world / (peak x mfu[bench] x family x eff_mb)
              eff_mb = tokens / (tokens + tokens_half): small per-rank microbatches run GEMMs less well
    tp        sequence-parallel all-gathers/reduce-scatters: 8 per layer per microbatch (4 forward,
              4 backward) of tokens x hidden x 2 B x (TP-1)/TP over the NVLink domain; the exposed
              part is `tp_exposed` of it with TP/GEMM overlap (userbuffers), `tp_exposed_no_overlap`
              without (NCCL streams still overlap some of it with independent work)
    cp        K/V exchange of context parallelism (ring attention), exposed like TP
    bubble    compute x (PP-1) / (GA x VP)   (interleaved 1F1B, Narayanan et al. 2021), plus the
              exposed part of the stage-to-stage sends (2 x GA x VP per step)
    dp        gradient reduce-scatter + parameter all-gather (distributed optimizer; an all-reduce is
              the same traffic) of the stage's trainable parameters over the DP group. Bandwidth:
              the NVLink domain when the group stays inside one, else k x NIC bandwidth where k = DP
              members per domain (NCCL spreads rings over all rails). Exposed = what does not fit
              under `dp_overlap` x compute.
    gather    gnn only: 1024-byte FP8 features for ~916 sampled nodes per seed, from local GPU memory
              (NVLink), from other nodes (NIC) or from host memory (PCIe), at `gather_eff` of the link
    overhead  fixed per step (`step_overhead_s[bench]`: optimizer, launches, host syncs)
    eval      the benchmark's evaluations at its cadence, forward only (gpt3, llama2, gnn; SD is untimed),
              each also paying `eval_overhead_s[bench]` (mode switch, metric all-reduce, logging; gnn
              evaluates overlapped with training in NVIDIA's implementation, so 0 there)
Samples to converge = the RCP mean at this GBS (harness.planner.rcp), so larger batches pay for
the extra samples they need.
"""

from __future__ import annotations

import math

from harness.planner import rcp
from harness.planner import workloads as W
from harness.planner.memory import Candidate


def compute_rate(w: W.Workload, hw, k: dict) -> float:
    """Useful FLOP/s per accelerator at large microbatches."""
    peak = hw.peak(w.precision)
    eff = k["mfu"][w.name] * family_factor(hw.family, k)
    if w.precision == "fp8" and not hw.has_fp8():
        eff *= k["fp8_gain"]  # a bf16-only chip runs the bf16 GEMMs at a higher fraction of its peak
    return peak * eff


def family_factor(family: str, k: dict) -> float:
    return float(k["family"].get(family, 1.0))


def _dp_bandwidth(hw, group: int, members_per_domain: int, k: dict) -> float:
    if group <= members_per_domain:
        return hw.intra_gbs * 1e9 * k["coll_eff"]
    return min(hw.intra_gbs, members_per_domain * hw.inter_gbs) * 1e9 * k["coll_eff"]


def _exposed_dp(bytes_moved: float, group: int, bw: float, hide_s: float) -> float:
    if group <= 1:
        return 0.0
    t = bytes_moved * (group - 1) / group / bw
    return max(0.0, t - hide_s)


def step(w: W.Workload, c: Candidate, hw, k: dict) -> dict:
    """Seconds per optimizer step by component."""
    world = hw.world
    rate = compute_rate(w, hw, k)
    if w.kind == "transformer":
        return _transformer_step(w, c, hw, k, rate, world)
    return _dp_step(w, c, hw, k, rate, world)


def _transformer_step(w, c, hw, k, rate, world):
    dp, ga = c.dp(world), c.ga(world)
    tokens = c.mbs * w.seq / c.cp
    eff_mb = tokens / (tokens + k["tokens_half"])
    extra = w.recompute[c.recompute].extra_compute
    compute = c.gbs * w.flops_per_sample * (1 + extra) / world / (rate * eff_mb)
    exposed = k["tp_exposed"] if c.tp_comm_overlap else k["tp_exposed_no_overlap"]
    layer_mbs = w.layers / c.pp * ga
    intra = hw.intra_gbs * 1e9 * k["coll_eff"]
    tp = 0.0
    if c.tp > 1:
        tp = layer_mbs * 8 * tokens * w.hidden * 2 * (c.tp - 1) / c.tp / intra * exposed
    cp = 0.0
    if c.cp > 1:  # K and V (grouped-query for llama2: 1/4 of hidden) forward, dK and dV backward
        kv = w.hidden / 4 if w.name == "llama2_70b_lora" else w.hidden
        bw = intra if c.tp * c.cp <= hw.domain else hw.inter_gbs * 1e9 * k["coll_eff"]
        cp = layer_mbs * 3 * 2 * tokens * kv / c.tp * 2 * (c.cp - 1) / bw * exposed
    bubble = compute * (c.pp - 1) / (ga * c.vp) if c.pp > 1 else 0.0
    p2p = 0.0
    if c.pp > 1:  # activations forward and gradients backward at every (virtual) stage boundary
        bw = intra if c.tp * c.cp * c.pp <= hw.domain else hw.inter_gbs * 1e9 * k["coll_eff"]
        p2p = 2 * ga * c.vp * tokens * w.hidden * 2 / c.tp / bw * k["tp_exposed"]
    trainable = (
        w.params_per_stage(c.tp, c.pp)
        if w.trainable_params >= w.params
        else w.trainable_params / (c.tp * c.pp)
    )
    per_domain = max(1, min(dp, hw.domain // max(1, c.tp * c.cp)))
    bw = _dp_bandwidth(hw, dp, per_domain, k)
    dp_t = _exposed_dp(trainable * 4, dp, bw, k["dp_overlap"] * compute)
    return {
        "compute": compute,
        "tp": tp + cp,
        "pp_bubble": bubble + p2p,
        "dp_exposed": dp_t,
        "overhead": k["step_overhead_s"][w.name],
    }


def _dp_step(w, c, hw, k, rate, world):
    b = c.mbs
    compute = b * w.flops_per_sample / rate
    gather = 0.0
    if w.name == "gnn":
        gather = b * W.GNN_BYTES_PER_SEED / (_gather_bw(hw, c.feature_store) * k["gather_eff"])
    per_domain = min(world, hw.domain)
    bw = _dp_bandwidth(hw, world, per_domain, k)
    dp_t = _exposed_dp(w.trainable_params * 4, world, bw, k["dp_overlap"] * compute)
    return {
        "compute": compute,
        "gather": gather,
        "tp": 0.0,
        "pp_bubble": 0.0,
        "dp_exposed": dp_t,
        "overhead": k["step_overhead_s"][w.name],
    }


def _gather_bw(hw, placement: str) -> float:
    if placement == "node":
        return hw.intra_gbs * 1e9
    if placement == "global":
        remote = 1 - 1 / max(1, hw.world // hw.domain)
        return 1e9 / (remote / hw.inter_gbs + (1 - remote) / hw.intra_gbs)
    return hw.host_gbs * 1e9


def eval_seconds(w: W.Workload, c: Candidate, hw, k: dict, samples: float) -> float:
    n, per_eval = W.n_evals(w, samples, c.gbs)
    if not n:
        return 0.0
    return n * k["eval_overhead_s"].get(w.name, 0.0) + _eval_work(w, c, hw, k, n, per_eval)


def _eval_work(w, c, hw, k, n, per_eval):
    rate = compute_rate(w, hw, k)
    if w.kind == "transformer":
        tokens = c.mbs * w.seq / c.cp
        eff_mb = tokens / (tokens + k["tokens_half"])
        # every DP replica runs ceil(samples / DP / MBS) microbatches; the slowest one counts
        mb = math.ceil(per_eval / (c.dp(hw.world) * c.mbs))
        bubble = (c.pp - 1) / (mb * c.vp) if c.pp > 1 else 0.0
        per_mb = c.mbs * w.fwd_flops_per_sample / (c.tp * c.pp * c.cp) / (rate * eff_mb)
        return n * mb * per_mb * (1 + bubble)
    per_seed = w.fwd_flops_per_sample / rate
    if w.name == "gnn":
        per_seed += W.GNN_BYTES_PER_SEED / (_gather_bw(hw, c.feature_store) * k["gather_eff"])
    return n * per_eval / hw.world * per_seed


def time_to_train(w: W.Workload, c: Candidate, hw, k: dict, ruleset: str = "4.0.0") -> dict:
    """Predicted minutes with the step breakdown (seconds) and the samples to converge."""
    samples = rcp.converge(w.name, c.gbs, ruleset) * w.samples_per_unit
    steps = math.ceil(samples / c.gbs)
    parts = step(w, c, hw, k)
    step_s = sum(parts.values())
    ev = eval_seconds(w, c, hw, k, samples)
    total = steps * step_s + ev
    return {
        "predicted_min": total / 60,
        "step_s": step_s,
        "steps": steps,
        "samples_to_converge": samples,
        "eval_s": ev,
        "breakdown_s": parts,
    }
