"""Step time and time-to-train for one candidate layout (seconds). Each term, with `k` the constants
(data/efficiency.yaml; `--explain` prints them with their values):

    compute   GBS x FLOPs/sample x (1 + recompute) / world / (rate x eff_mb); rate = bf16 peak x
              mfu[bench] x family[family] x stack_eff[stack][bench] (x fp8_speedup with FP8);
              eff_mb = tokens / (tokens + tokens_half): small per-rank microbatches run GEMMs less well;
              a MoE model's routed experts (their FLOP share) at the rows each local expert sees,
              tokens / TP x top-k x EP / experts
    tp        tensor-parallel collectives per layer and microbatch: with sequence parallelism 8
              all-gathers/reduce-scatters of tokens x hidden (bf16), else 4 all-reduces; over the
              scale-up fabric at coll_eff, exposed `tp_exposed` with GEMM overlap (userbuffers),
              `tp_exposed_no_overlap` without; + coll_latency_s per collective (gloo: large)
    cp        K/V ring exchange of context parallelism (ring attention), exposed like TP
    ep        mixture of experts: the token all-to-alls (dispatch + combine, forward and backward)
              of each MoE layer and microbatch, tokens x top-k x hidden (bf16) x (EP-1)/EP per rank,
              over the scale-up fabric when the EP group fits the NVLink domain, else the NIC's
              bandwidth, at coll_eff; exposed in full (`ep_exposed`, default 1: no overlap assumed)
    bubble    compute x (PP-1) / (GA x VP) (interleaved 1F1B, Narayanan et al. 2021) + the exposed
              stage-to-stage sends (2 x GA x VP per step)
    dp        gradient reduce-scatter + parameter all-gather (= all-reduce traffic) of the stage's
              trainable parameters over DP (a MoE model's routed experts over TP x CP x DP / EP): inside the scale-up domain at its bandwidth, else k x
              NIC bandwidth (k = DP members per domain); exposed beyond dp_overlap x compute
    fsdp      sharded weights (FSDP2 / ZeRO-3): two all-gathers of the stage's weights per
              microbatch (forward, and again in backward) + the gradients' reduce-scatter,
              exposed beyond fsdp_overlap x compute
    gather    data-parallel workloads: input work per sample the FLOPs do not count, from the
              benchmark's cost model (`input_s_per_sample`; 0 for most)
    overhead  step_overhead_s[bench] x stack_overhead[stack][bench] per step + microbatch_overhead_s[bench] per microbatch
              (the harness: Python per forward/backward) + data_s_per_sample x samples per rank
    eval      the benchmark's evaluations at its cadence (forward only), each + eval_overhead_s,
              or the cost model's own evaluation work (`eval_work`); the harness also saves a
              resumable checkpoint every `checkpoint_every_steps` (checkpoint_s[bench] each)
Every term x time_scale (1; a calibration of the harness's constants sets this machine's speed).
Samples to converge (harness.planner.workloads): the RCP mean at this GBS at full size, so larger
batches pay for the extra samples they need; tiny sizes from data/tiny.yaml or the user's calibration.
"""

from __future__ import annotations

import math

from benchmarks.costs import Workload
from harness.planner import workloads as W
from harness.planner.memory import Candidate


def bench_value(k: dict, key: str, bench: str, default: float = 0.0) -> float:
    v = k.get(key, default)
    return float(v.get(bench, default)) if isinstance(v, dict) else float(v)


def compute_rate(w: Workload, c: Candidate, hw, k: dict) -> float:
    """Useful FLOP/s per accelerator at large microbatches."""
    precision = "bf16" if w.precision == "fp8" else w.precision
    rate = hw.peak(precision) * bench_value(k, "mfu", w.name)
    rate *= float(k.get("family", {}).get(hw.family, 1.0)) * float(k.get("stack_factor", 1.0))
    if w.precision == "fp8" and c.fp8:
        rate *= k["fp8_speedup"]
    return rate


def _coll(k: dict, nbytes: float, bw: float, n: int = 1) -> float:
    """n collectives of nbytes each over bandwidth bw (bytes/s), with the per-call latency."""
    return n * (k.get("coll_latency_s", 0.0) + nbytes / bw)


def _dp_bandwidth(hw, group: int, members_per_domain: int, k: dict) -> float:
    if group <= members_per_domain:
        return hw.intra_gbs * 1e9 * k["coll_eff"]
    return min(hw.intra_gbs, members_per_domain * hw.inter_gbs) * 1e9 * k["coll_eff"]


def _exposed(t: float, hide_s: float) -> float:
    return max(0.0, t - hide_s)


def step(w: Workload, c: Candidate, hw, k: dict) -> dict:
    """Seconds per optimizer step by component (x time_scale: a calibrated machine's speed)."""
    parts = _model_parallel_step(w, c, hw, k) if w.kind == "model_parallel" else _dp_step(w, c, hw, k)
    scale = k.get("time_scale", 1.0)
    return {name: v * scale for name, v in parts.items()} if scale != 1.0 else parts


def _tp_per_mb(w, c, hw, k, layers: float, forward_only: bool = False) -> float:
    """Exposed TP + CP seconds per microbatch on one stage."""
    if c.tp == 1 and c.cp == 1:
        return 0.0
    tokens = c.mbs * w.seq / c.cp
    intra = hw.intra_gbs * 1e9 * k["coll_eff"]
    exposed = k["tp_exposed"] if c.tp_comm_overlap else k["tp_exposed_no_overlap"]
    t = 0.0
    if c.tp > 1:
        act_b = 4 if hw.kind == "cpu" else 2
        vol = tokens * w.hidden * act_b * (c.tp - 1) / c.tp
        if hw.kind == "cpu" or c.impl == "harness" and not w.sequence_parallel:
            n = (2 if forward_only else 4) * layers + 4  # all-reduces (+ embedding, vocab-parallel loss)
            t += _coll(k, 2 * vol, intra, n)
        else:
            t += _coll(k, vol, intra, (4 if forward_only else 8) * layers)
    if c.cp > 1:  # K and V forward, dK and dV backward, CP-1 ring steps per layer
        bw = intra if c.tp * c.cp <= hw.domain else hw.inter_gbs * 1e9 * k["coll_eff"]
        kv = 2 * tokens * w.hidden * w.kv_fraction / c.tp * 2
        t += _coll(k, kv, bw, int(layers * (1 if forward_only else 3)) * (c.cp - 1))
    return t * exposed


def _a2a_per_mb(w: Workload, c: Candidate, hw, k: dict) -> float:
    """Exposed all-to-all seconds per microbatch on one stage (0 at EP 1: every expert local)."""
    if w.moe is None or c.ep == 1:
        return 0.0
    # EP groups are EP consecutive ranks (expert TP 1): NVLink when they fit one domain
    bw = (hw.intra_gbs if c.ep <= hw.domain else hw.inter_gbs) * 1e9 * k["coll_eff"]
    tokens = c.mbs * w.seq / c.cp / (c.tp if w.sequence_parallel or c.impl == "record" else 1)
    nbytes = w.moe.a2a_bytes(tokens, w.hidden, w.moe.moe_layers / c.pp, c.ep)
    n = 4 * max(1, round(w.moe.moe_layers / c.pp))  # one collective per exchange and layer
    return _coll(k, nbytes / n, bw, n) * k.get("ep_exposed", 1.0)


def _model_parallel_step(w, c, hw, k):
    world = hw.world
    dp, ga = c.dp(world), c.ga(world)
    tokens = c.mbs * w.seq / c.cp
    eff_mb = tokens / (tokens + k["tokens_half"])
    rate = compute_rate(w, c, hw, k)
    extra = w.recompute[c.recompute].extra_compute
    if w.moe is not None:  # the routed experts' GEMMs see only their share of the tokens
        rows = w.moe.expert_rows(tokens / c.tp, c.ep)
        eff_exp = rows / (rows + k["tokens_half"])
        eff_mb = 1 / ((1 - w.moe.expert_share) / eff_mb + w.moe.expert_share / eff_exp)
    compute = c.gbs * w.flops_per_sample * (1 + extra) / world / (rate * eff_mb)
    layers = w.layers / c.pp
    tp = ga * _tp_per_mb(w, c, hw, k, layers)
    bubble = compute * (c.pp - 1) / (ga * c.vp) if c.pp > 1 else 0.0
    p2p = 0.0
    if c.pp > 1:  # activations forward and gradients backward at every (virtual) stage boundary
        bw = hw.intra_gbs if c.tp * c.cp * c.pp <= hw.domain else hw.inter_gbs
        p2p = (
            _coll(k, tokens * w.hidden * 2 / c.tp, bw * 1e9 * k["coll_eff"], 2 * ga * c.vp) * k["tp_exposed"]
        )
    stage = w.params_per_stage(c.tp, c.pp)
    trainable = stage if w.trainable_params >= w.params else w.trainable_params / (c.tp * c.pp)
    per_domain = max(1, min(dp, hw.domain // max(1, c.tp * c.cp)))
    grad_b = 4 if (hw.kind == "cpu" or c.impl == "harness") else 2
    dp_t = 0.0
    if dp * (c.cp if c.fsdp else 1) > 1:
        group = dp * c.cp if c.fsdp else dp
        bw = _dp_bandwidth(hw, group, per_domain, k)
        dp_t = _coll(k, 2 * trainable * grad_b * (group - 1) / group, bw)
    if w.moe is not None and c.tp * c.cp * dp > c.ep:
        # the routed experts' gradients reduce over the expert-DP group (TP x CP x DP / EP ranks,
        # expert TP 1): EP cuts both what each rank holds and what it sends
        egroup = c.tp * c.cp * dp // c.ep
        ebw = _dp_bandwidth(hw, egroup * c.ep, hw.domain, k)
        experts = w.moe.expert_params_rank(c.pp, c.ep)
        dp_t += _coll(k, 2 * experts * grad_b * (egroup - 1) / egroup, ebw)
    out = {"compute": compute, "tp": tp, "pp_bubble": bubble + p2p}
    if w.moe is not None:
        out["ep_a2a"] = ga * _a2a_per_mb(w, c, hw, k)
    hide = bench_value(k, "dp_overlap", w.name) * compute
    if c.fsdp and dp * c.cp > 1:
        group = dp * c.cp
        bw = _dp_bandwidth(hw, group, max(1, min(group, hw.domain)), k)
        gather = ga * _coll(k, 2 * stage * 2 * (group - 1) / group, bw, 1)
        out["fsdp"] = _exposed(gather, k["fsdp_overlap"] * compute)
    out["dp_exposed"] = _exposed(dp_t, hide)
    out["overhead"] = _overheads(w, k, ga, c.mbs * ga)
    return out


def _overheads(w, k, ga: int, samples_rank: int) -> float:
    return (
        bench_value(k, "step_overhead_s", w.name) * k.get("stack_overhead_factor", 1.0)
        + ga * bench_value(k, "microbatch_overhead_s", w.name)
        + samples_rank * bench_value(k, "data_s_per_sample", w.name)
    )


def _dp_step(w, c, hw, k):
    world = hw.world
    ga = c.ga(world)
    rate = compute_rate(w, c, hw, k)
    compute = c.gbs / world * w.flops_per_sample / rate
    gather = c.gbs / world * w.cost.input_s_per_sample(w, c, hw, k)
    per_domain = min(world, hw.domain)
    bw = _dp_bandwidth(hw, world, per_domain, k)
    grad_b = 8 if c.impl == "harness" else 4  # fp32 all-reduce (DDP) vs the record implementations' 16-bit
    dp_t = _coll(k, w.trainable_params * grad_b * (world - 1) / world, bw) if world > 1 else 0.0
    return {
        "compute": compute,
        "gather": gather,
        "tp": 0.0,
        "pp_bubble": 0.0,
        "dp_exposed": _exposed(dp_t, bench_value(k, "dp_overlap", w.name) * compute),
        "overhead": _overheads(w, k, ga, c.mbs * ga),
    }


def eval_seconds(w: Workload, c: Candidate, hw, k: dict, samples: float) -> tuple[float, float]:
    """(seconds of all evaluations, number of evaluations)."""
    own = w.cost.eval_work(w, c, hw, samples, compute_rate(w, c, hw, k))
    if own is not None:  # the cost model's own evaluation: eval_overhead_s once each, no stack factor
        n, work = own
        return n * (bench_value(k, "eval_overhead_s", w.name) + work) * k.get("time_scale", 1.0), n
    n, per_eval = w.cost.evals(w, samples, c.gbs)
    if not n:
        return 0.0, 0.0
    one = bench_value(k, "eval_overhead_s", w.name) * k.get("stack_overhead_factor", 1.0)
    one += _eval_work(w, c, hw, k, per_eval)
    return n * one * k.get("time_scale", 1.0), n


def _eval_work(w, c, hw, k, per_eval):
    """Seconds of one evaluation's forward passes (the slowest rank)."""
    rate = compute_rate(w, c, hw, k)
    if w.kind == "model_parallel":
        tokens = c.mbs * w.seq / c.cp
        eff_mb = tokens / (tokens + k["tokens_half"])
        mbs = (w.eval_mbs or c.mbs) if c.impl == "harness" else c.mbs
        mb = math.ceil(per_eval / (c.dp(hw.world) * mbs))
        bubble = (c.pp - 1) / (mb * c.vp) if c.pp > 1 else 0.0
        per_mb = mbs * w.fwd_flops_per_sample / (c.tp * c.pp * c.cp) / (rate * eff_mb)
        per_mb += _tp_per_mb(w, c, hw, k, w.layers / c.pp, forward_only=True)
        per_mb += bench_value(k, "microbatch_overhead_s", w.name) * k["eval_microbatch_share"]
        return mb * per_mb * (1 + bubble)
    per_sample = w.fwd_flops_per_sample / rate + w.cost.input_s_per_sample(w, c, hw, k)
    return per_eval / hw.world * per_sample


def _checkpoints(w, c, k, steps: int) -> float:
    """The harness saves resumable checkpoints every `checkpoint_every_steps` (at an evaluation
    boundary), each costing checkpoint_s[bench]; the record implementations' times include none."""
    every = w.cost.checkpoint_every_steps(w.cfg) if c.impl == "harness" else 0
    if not every:
        return 0.0
    return steps // every * bench_value(k, "checkpoint_s", w.name) * k.get("time_scale", 1.0)


def time_to_train(w: Workload, c: Candidate, hw, k: dict, ruleset: str = "4.0.0", tiny=None) -> dict:
    """Predicted minutes with the step breakdown (seconds) and the samples to converge."""
    samples = W.samples_to_converge(w, c.gbs, ruleset, tiny)
    steps = math.ceil(samples / c.gbs)
    parts = step(w, c, hw, k)
    step_s = sum(parts.values())
    ev, n_ev = eval_seconds(w, c, hw, k, steps * c.gbs)
    ev += _checkpoints(w, c, k, steps)
    total = steps * step_s + ev
    return {
        "predicted_min": total / 60,
        "step_s": step_s,
        "steps": steps,
        "samples_to_converge": samples,
        "eval_s": ev,
        "evals": n_ev,
        "breakdown_s": parts,
    }
