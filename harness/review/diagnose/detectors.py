"""The troubleshooting table, one detector per row. Each returns a Finding (evidence in numbers
and the remedy) or None. Thresholds are chosen so a healthy run on a busy 2-core laptop stays
quiet: a symptom must cost a sizeable share of the time, not one slow step.

| symptom                                       | likely cause        | remedy                          |
|-----------------------------------------------|---------------------|---------------------------------|
| step time varies a lot, periodic stalls       | network congestion  | check NCCL P2P / topology       |
|   ... in a one-process run (no collectives)   | the host, its I/O   | idle host, local disk           |
| accelerator idle, high data-wait share        | data loading        | more workers, larger prefetch   |
| loss diverges / eval flat or getting worse    | learning rate       | `mlperf lr-find`                |
| out of memory                                 | batch / parallelism | GA (smaller MBS, same GBS), TP/PP|
| MoE: busiest expert >= 2x the mean tokens     | router imbalance    | aux loss / expert bias          |
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field

import benchmarks
from harness.core.errors import ConfigError
from harness.core.runfolder import ROUTING_FILE
from harness.review.diagnose import host
from harness.review.diagnose.inputs import RunData

WARMUP_STEPS = 3  # first steps (graph capture, allocator, caches) are never representative


@dataclass
class Finding:
    id: str
    symptom: str
    cause: str
    evidence: dict
    remedy: list[str]
    summary: str = ""
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _steady(rows: list[dict]) -> list[dict]:
    skip = min(WARMUP_STEPS, max(0, len(rows) - 5))
    return rows[skip:]


def _r(x: float, digits: int = 5) -> float:
    return float(f"{x:.{digits}g}") if math.isfinite(x) else x


def _num(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


# ---- 1. unstable speed -> network congestion -------------------------------------------------
STALL_FACTOR = 3.0
STALL_SHARE = 0.15  # stalls cost >= 15 % of the steady-state time ...
STALL_MIN = 3  # ... over at least three stalls. (Step-time CV is evidence only: a busy shared
# machine reaches CV 0.7 with ~10 % lost; measured on tiny gpt3 runs next to other jobs.)


def unstable_speed(run: RunData) -> Finding | None:
    rows = _steady(run.timings)
    if len(rows) < 10:
        return None
    compute = []
    for r in rows:
        t, w = _num(r.get("step_time_s")), _num(r.get("data_wait_s")) or 0.0
        if t is not None:
            compute.append((r.get("step"), max(t - w, 0.0)))  # data stalls belong to the data row
    times = [c for _, c in compute]
    if len(times) < 10:
        return None
    med = statistics.median(times)
    if med <= 0:
        return None
    mean, std = statistics.fmean(times), statistics.pstdev(times)
    cv = std / mean if mean else 0.0
    stalls = [(s, c) for s, c in compute if c > STALL_FACTOR * med]
    lost = sum(c - med for _, c in stalls)
    share = lost / sum(times)
    period = _period([s for s, _ in stalls if isinstance(s, int)])
    if len(stalls) < STALL_MIN or share < STALL_SHARE:
        return None
    ev = {
        "steps": len(times),
        "median_step_s": round(med, 4),
        "step_time_cv": round(cv, 3),
        "stalls": len(stalls),
        "stall_threshold_s": round(STALL_FACTOR * med, 4),
        "mean_stall_s": round(statistics.fmean(c for _, c in stalls), 4),
        "time_lost_share": round(share, 3),
    }
    if period:
        ev["stall_every_steps"] = period
    when = f", every ~{period} steps" if period else ""
    summary = (
        f"{len(stalls)} stalls > {STALL_FACTOR:g}x the median step ({med * 1e3:.1f} ms){when}; "
        f"step-time CV {cv:.2f}; {share:.0%} of the time lost"
    )
    if run.processes is not None:
        ev["processes"] = run.processes
    if run.host:
        ev.update(run.host)
    if busy := host.busy(run.host):  # evidence beside the cause, on either path below
        summary += f"; {busy}"
    if run.processes == 1:  # no collective ran: the network cannot have stalled it
        return Finding(
            id="unstable_speed",
            symptom="unstable training speed",
            cause=host.ONE_PROCESS_CAUSE,
            evidence=ev,
            summary=summary,
            remedy=list(host.ONE_PROCESS_REMEDY),
        )
    return Finding(
        id="unstable_speed",
        symptom="unstable training speed",
        cause="network congestion (collectives waiting on a slow or shared link)",
        evidence=ev,
        summary=summary,
        remedy=[
            "check NCCL P2P and the topology: `nvidia-smi topo -m` (GPUs of one TP group on NVLink), "
            "`NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH` (P2P/NVLS and IB transports in use, not SHM/socket)",
            "measure the fabric alone: nccl-tests `all_reduce_perf -b 8M -e 4G -f 2 -g 8` on the same nodes",
            "check for other jobs on the same switches/rails, NCCL_IB_HCA / NCCL_SOCKET_IFNAME, "
            "NCCL_P2P_DISABLE / NCCL_IB_DISABLE left set; periodic stalls also come from checkpointing "
            "or logging on a shared filesystem",
        ],
    )


def _period(steps: list[int]) -> int | None:
    """The stalls' period in steps. First the longest exact period p for which one residue class
    (steps = r mod p) holds >= 70 % of the stalls, at least three, and >= 70 % of that class's
    steps in the stalls' span (random stalls fill no lattice): a periodic cause (a checkpoint, a
    collective every N steps) plus a few stalls of another cause (a busy host) breaks the gaps
    around each extra stall, not the lattice. Else the median gap, when the gaps are regular
    (a period in time rather than in steps)."""
    if len(steps) < 3:
        return None
    first, last = steps[0], steps[-1]
    for p in range((last - first) // 2, 1, -1):
        r, hits = Counter(s % p for s in steps).most_common(1)[0]
        lattice = len(range(first + (r - first) % p, last + 1, p))
        if hits >= max(3, 0.7 * len(steps)) and hits >= 0.7 * lattice:
            return p
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    g = statistics.median(gaps)
    regular = sum(1 for x in gaps if abs(x - g) <= max(1, 0.2 * g)) / len(gaps)
    return int(round(g)) if regular >= 0.7 and g >= 2 else None


# ---- 2. data loading --------------------------------------------------------------------------
DATA_SHARE = 0.25


def data_loading(run: RunData) -> Finding | None:
    rows = _steady(run.timings)
    if len(rows) < 5:
        return None
    total = sum(_num(r.get("step_time_s")) or 0.0 for r in rows)
    wait = sum(_num(r.get("data_wait_s")) or 0.0 for r in rows)
    if total <= 0:
        return None
    share = wait / total
    if share < DATA_SHARE:
        return None
    tput = [_num(r.get("samples_per_s")) for r in rows]
    tput = [t for t in tput if t]
    ideal = (statistics.fmean(tput) / (1 - share)) if tput and share < 0.99 else None
    ev = {
        "steps": len(rows),
        "data_wait_share": round(share, 3),
        "median_data_wait_s": round(statistics.median(_num(r.get("data_wait_s")) or 0.0 for r in rows), 4),
        "median_step_s": round(statistics.median(_num(r.get("step_time_s")) or 0.0 for r in rows), 4),
    }
    if tput:
        ev["samples_per_s"] = round(statistics.fmean(tput), 2)
    if ideal:
        ev["samples_per_s_without_wait"] = round(ideal, 2)
    remedy = [
        "more data-loader worker processes (torch DataLoader num_workers; one or more per accelerator, "
        "up to the CPU cores of the node / accelerators)",
        "a larger prefetch buffer (prefetch_factor, pin_memory=True, non_blocking copies) so the next "
        "batch is ready before the step ends",
        "keep the dataset on local NVMe or in the page cache (RAM disk) instead of a network filesystem",
    ]
    if _modality(run.benchmark) == "image":
        remedy.insert(0, "image benchmark: decode and augment on the GPU with NVIDIA DALI at full size")
    return Finding(
        id="data_loading",
        symptom="low accelerator utilisation with a high data-wait share",
        cause="data loading cannot keep up with the model",
        evidence=ev,
        summary=f"{share:.0%} of each step is spent waiting for the next batch",
        remedy=remedy,
    )


def _modality(name: str | None) -> str | None:
    """What one sample of a registered benchmark is ("image", "text", "graph"); None for others."""
    try:
        return benchmarks.get(name or "").modality
    except ConfigError:
        return None


# ---- 3. learning rate ----------------------------------------------------------------------------
def _direction(run: RunData) -> tuple[str, float | None]:
    """('lower'|'higher', target) from the plan, else the benchmark registry."""
    target = None
    if run.plan is not None and run.plan.target:
        target = next(iter(run.plan.target.values()))
    try:
        q = benchmarks.get(run.benchmark).rules.quality[0]
        size = run.plan.size if run.plan else ("tiny" if run.first("harness_size") == "tiny" else "full")
        return q.direction, target if target is not None else q.target(size)
    except Exception:  # noqa: BLE001 - unknown benchmark: assume a loss (lower is better)
        return "lower", target


FLAT_EVALS = 4
FLAT_PROGRESS = 0.05  # < 5 % of the way to the target over the last evaluations = flat


def learning_rate(run: RunData) -> Finding | None:
    evals = run.evals()
    direction, target = _direction(run)
    sign = 1.0 if direction == "lower" else -1.0  # sign * value: lower is better
    values = [v for _, v in evals]
    losses = [(r.get("step"), _num(r.get("loss"))) for r in run.timings if r.get("loss") is not None]
    nonfinite = [v for v in values if not math.isfinite(v)] + [
        r.get("loss")
        for r in run.timings
        if isinstance(r.get("loss"), float) and not math.isfinite(r["loss"])
    ]
    reached = target is not None and any(math.isfinite(v) and sign * v <= sign * target for v in values)
    lr = run.first("opt_base_learning_rate")
    ev: dict = {"evaluations": len(values), "target": target, "direction": direction}
    if lr is not None:
        ev["opt_base_learning_rate"] = lr
    for k in ("opt_learning_rate_warmup_steps", "global_batch_size"):
        if run.first(k) is not None:
            ev[k] = run.first(k)
    finite = [v for v in values if math.isfinite(v)]
    if finite:
        ev["first_eval"], ev["best_eval"], ev["last_eval"] = (
            _r(finite[0]),
            _r(min(finite, key=lambda v: sign * v)),
            _r(finite[-1]),
        )
    fl = [v for _, v in losses if v is not None]
    if fl:
        ev["first_train_loss"], ev["last_train_loss"] = _r(fl[0]), _r(fl[-1])

    kind = None
    if nonfinite:
        kind = "diverged"
        ev["non_finite_values"] = len(nonfinite)
    elif reached:
        return None
    elif len(finite) >= 2 and sign * finite[-1] > sign * finite[0] + 0.02 * abs(finite[0]):
        kind = "diverging"
    elif len(fl) >= 4 and fl[-1] > 1.5 * fl[0] > 0:
        kind = "diverging"
    elif len(finite) >= FLAT_EVALS and target is not None:
        window = finite[-FLAT_EVALS:]
        gap = sign * (window[0] - target)
        gained = sign * (window[0] - window[-1])
        if gap > 0 and gained < FLAT_PROGRESS * gap:
            kind = "flat"
            ev["progress_over_last_evals"] = round(gained / gap, 4)
    if kind is None:
        return None
    bench = run.benchmark or "BENCH"
    system = run.plan.submission.system if run.plan else "SYSTEM"
    words = {
        "diverged": "the loss became NaN/inf",
        "diverging": "the quality got worse instead of better",
        "flat": f"the last {FLAT_EVALS} evaluations barely moved toward the target",
    }[kind]
    remedy = [
        f"run the LR range test: `mlperf lr-find {bench} --system {system}` and use its suggested LR "
        f"(`--set opt_base_learning_rate=...`)",
    ]
    if kind in ("diverged", "diverging"):
        remedy.append(
            "if the LR is already at the suggestion: longer warmup (opt_learning_rate_warmup_steps), "
            "gradient clipping (opt_gradient_clip_norm), bf16 instead of fp16"
        )
    else:
        remedy.append("a flat curve can also be too low an LR or too short a warmup/decay for this GBS")
    return Finding(
        id="learning_rate",
        symptom=f"loss not converging ({kind})",
        cause="learning rate (too high when diverging, mis-scaled for the batch when flat)",
        evidence=ev,
        summary=f"{words}" + (f"; opt_base_learning_rate={lr}" if lr is not None else ""),
        remedy=remedy,
        extra={"kind": kind},
    )


# ---- 4. out of memory --------------------------------------------------------------------------
OOM_RE = re.compile(
    r"(CUDA out of memory|OutOfMemoryError|out of memory|can't allocate memory|"
    r"DefaultCPUAllocator: not enough memory|MemoryError|Cannot allocate memory|oom-kill|OOM killer)",
    re.IGNORECASE,
)


def out_of_memory(run: RunData) -> Finding | None:
    text = run.output + "\n" + str(run.stop_metadata.get("error", ""))
    m = OOM_RE.search(text)
    killed = "code -9" in str(run.stop_metadata.get("error", "")) or "code 137" in str(
        run.stop_metadata.get("error", "")
    )
    if not m:
        return None
    line = next((ln.strip() for ln in text.splitlines() if OOM_RE.search(ln)), m.group(0))
    ev: dict = {"error": line[:300]}
    rss = [_num(r.get("max_rss_mb")) for r in run.timings]
    rss = [x for x in rss if x]
    if rss:
        ev["max_rss_mb"] = round(max(rss), 1)
    if killed:
        ev["killed"] = True
    remedy, layout = _memory_remedies(run)
    if layout:
        ev["layout"] = layout
    return Finding(
        id="out_of_memory",
        symptom="out of memory",
        cause="activations/optimizer state of one micro-batch do not fit",
        evidence=ev,
        summary=f"the run died with '{m.group(0)}'" + (f" ({layout})" if layout else ""),
        remedy=remedy,
    )


def _memory_remedies(run: RunData) -> tuple[list[str], str | None]:
    plan = run.plan
    if plan is None:
        gbs, ga = run.first("global_batch_size"), run.first("gradient_accumulation_steps")
        return (
            [
                f"gradient accumulation: halve micro_batch_size, keep global_batch_size {gbs or ''} "
                f"(GA {ga or '?'} doubles)".replace("  ", " "),
                "more model parallelism: tensor_model_parallel_size x2 within a node, or "
                "pipeline_model_parallel_size x2",
            ],
            None,
        )
    lay = plan.layout
    out: list[str] = []
    bench, system = plan.benchmark, plan.submission.system
    cmd = f"mlperf run {bench} --system {system}"
    if lay.micro_batch_size > 1:
        m2 = lay.micro_batch_size // 2
        alt = _try(plan, micro_batch_size=m2)
        if alt:
            out.append(
                f"gradient accumulation: `{cmd} --set micro_batch_size={m2}` -> {alt} "
                f"(same global batch {lay.global_batch_size}, activations per micro-batch halved)"
            )
    for key, mult in (
        ("tensor_model_parallel_size", lay.tp * 2),
        ("pipeline_model_parallel_size", lay.pp * 2),
    ):
        alt = _try(plan, **{key: mult})
        if alt:
            out.append(f"more model parallelism: `{cmd} --set {key}={mult}` -> {alt}")
    cfg = plan.config
    if cfg.get("activation_recompute") == "none":
        out.append(f"activation recomputation: `{cmd} --set activation_recompute=selective`")
    if not out:
        out.append(
            "no smaller layout fits this world size: use more nodes (more DP shards the optimizer with "
            "distributed_optimizer=true) or a larger-memory accelerator"
        )
    return out, lay.describe()


def _try(plan, **changes) -> str | None:
    """The layout after `changes` (validated by harness.core.layout.derive), or None if impossible."""
    from harness.core import layout as layout_mod

    try:
        cfg = benchmarks.get(plan.benchmark).typed(plan.config)
        new = type(cfg).model_validate({**cfg.model_dump(), **changes})
        lay = plan.layout
        got = layout_mod.derive(
            new,
            lay.nodes,
            lay.procs_per_node,
            None,
            num_layers=getattr(new, "num_layers", None),
            supports=type(new).SUPPORTS,
        )
    except Exception:  # noqa: BLE001 - an impossible suggestion is simply not made
        return None
    return got.describe()


# ---- 5. unbalanced experts (MoE) -----------------------------------------------------------------
EXPERT_LOAD_RATIO = 2.0
# Busiest expert's tokens / the mean over the layer's experts, over the last evaluation interval
# (routing.jsonl's last line). 2x: with expert parallelism the layer waits for that expert's rank,
# which does twice the average expert work (the layer's expert time doubles), and a capacity
# factor of 1-1.25 would drop half its tokens; yet an interval holds thousands of tokens per expert
# (tiny gpt_oss_20b: ~3,000), so its sampling noise is a few percent and 2x is the router, not chance.


def expert_load(run: RunData) -> Finding | None:
    if not run.routing:  # dense models write no routing.jsonl
        return None
    last = run.routing[-1]
    worst, unbalanced, layers = None, 0, 0
    for lay in last["layers"]:
        tokens = lay.get("tokens") if isinstance(lay, dict) else None
        if not isinstance(tokens, list) or not tokens or any(_num(t) is None or t < 0 for t in tokens):
            continue
        total = sum(tokens)
        if total <= 0:
            continue
        layers += 1
        ratio = max(tokens) * len(tokens) / total
        unbalanced += ratio >= EXPERT_LOAD_RATIO
        if worst is None or ratio > worst[0]:
            worst = (ratio, lay, tokens)
    if worst is None or worst[0] < EXPERT_LOAD_RATIO:
        return None
    ratio, lay, tokens = worst
    expert = tokens.index(max(tokens))
    path = str(run.run_dir / ROUTING_FILE) if run.run_dir else ROUTING_FILE
    ev = {
        "file": path,
        "step": last["step"],
        "layer": lay.get("layer"),
        "expert": expert,
        "max_over_mean": round(ratio, 3),
        "expert_tokens": max(tokens),
        "mean_tokens": round(sum(tokens) / len(tokens), 1),
        "layers_unbalanced": f"{unbalanced} of {layers}",
    }
    for k, v in (("aux_loss", last.get("aux_loss")), ("expert_bias_absmax", lay.get("expert_bias_absmax"))):
        if _num(v) is not None:  # null: that balancing is off
            ev[k] = v
    cfg = run.plan.config if run.plan is not None else {}
    cmd = f"mlperf run {run.benchmark or 'BENCH'} --system {run.plan.submission.system if run.plan else 'SYSTEM'}"
    coeff = cfg.get("moe_aux_loss_coeff")
    remedy = [
        f"raise the load-balancing loss: `{cmd} --set moe_aux_loss_coeff={max(2 * coeff, 1e-2):g}` (now {coeff:g})"
        if _num(coeff)
        else f"turn on the load-balancing aux loss: `{cmd} --set moe_aux_loss_coeff=1e-2` (megatron's usual "
        "value; routing.jsonl's aux_loss then shows it)",
        "or DeepSeek's aux-loss-free balancing: `--set moe_router_enable_expert_bias=true "
        "--set moe_router_score_function=sigmoid` (megatron's expert bias needs sigmoid scores)"
        if not cfg.get("moe_router_enable_expert_bias")
        else "the expert bias (moe_router_enable_expert_bias) is on: if the imbalance persists over "
        "several lines of routing.jsonl, add a small moe_aux_loss_coeff",
        f"read max_over_mean over the lines of {ROUTING_FILE}: an imbalance that shrinks from evaluation "
        "to evaluation is the router still learning; one that grows is collapse onto few experts",
    ]
    return Finding(
        id="expert_load",
        symptom="expert load is unbalanced",
        cause="the MoE router sends most tokens to a few experts (load balancing too weak or off)",
        evidence=ev,
        summary=f"layer {lay.get('layer')}: expert {expert} got {ratio:.2f}x the mean tokens over the "
        f"interval ending at step {last['step']} ({unbalanced} of {layers} layers >= {EXPERT_LOAD_RATIO:g}x; {path})",
        remedy=remedy,
    )


DETECTORS = (unstable_speed, data_loading, learning_rate, out_of_memory, expert_load)
