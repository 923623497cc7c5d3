"""Layout search: enumerate the candidates the rules allow, drop those that do not fit memory (with
the reason), predict the rest, rank by predicted time-to-train.

gpt3 / llama2_70b_lora: TP (divisors of the NVLink domain), PP (divisors of the layer count), VP
(interleaving; layers must split into PP x VP equal chunks), CP, MBS, and GA -> GBS. gnn /
stable_diffusion: the per-accelerator batch (GBS = world x batch). Every candidate goes through
`harness.core.layout.derive`, the one place layouts are checked; the GBS must lie in the range the
official RCPs cover, and gpt3's learning rate follows from the GBS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

from harness.core.errors import ConfigError
from harness.core.layout import derive
from harness.planner import calibration as C
from harness.planner import memory as M
from harness.planner import rcp
from harness.planner import timing as T
from harness.planner import workloads as W

RULESET = "4.0.0"


@dataclass
class Option:
    candidate: M.Candidate
    memory_gib: dict
    time: dict
    lr: float | None = None

    @property
    def minutes(self) -> float:
        return self.time["predicted_min"]

    def overrides(self, w: W.Workload) -> dict:
        c = self.candidate
        out = {"global_batch_size": c.gbs, "micro_batch_size": c.mbs}
        if w.kind == "transformer":
            out.update(
                tensor_model_parallel_size=c.tp,
                pipeline_model_parallel_size=c.pp,
                virtual_pipeline_model_parallel_size=c.vp,
                context_parallel_size=c.cp,
            )
        if self.lr is not None:
            out["opt_base_learning_rate"] = self.lr
        return out


@dataclass
class Plan:
    bench: str
    hardware: object
    options: list[Option]
    rejected: dict[str, int] = field(default_factory=dict)
    """Reason -> number of candidates dropped for it."""
    considered: int = 0


def _divisors(n: int, limit: int | None = None) -> list[int]:
    return [d for d in range(1, (limit or n) + 1) if n % d == 0]


def _gbs_values(unit: int, lo: int, hi: int, fixed: int | None) -> list[int]:
    """GBS multiples of `unit` (= DP x MBS): the fixed one, or a spread over the RCP range."""
    if fixed is not None:
        return [fixed] if fixed % unit == 0 else []
    first = max(1, -(-lo // unit))
    last = hi // unit
    if last < first:
        return [first * unit] if first * unit <= hi else []
    gas = set(range(first, min(last, first + 8) + 1))
    g = first
    while g <= last:
        gas.add(g)
        g = int(g * 1.25) + 1
    gas.add(last)
    return sorted(ga * unit for ga in gas)


def _transformer_candidates(w: W.Workload, hw, k: dict, gbs: int | None, supports=None, fsdp=False):
    lo, hi = rcp.bs_range(w.name, RULESET)
    fp8 = hw.has_fp8()
    overlap = hw.intra_gbs >= 100  # userbuffer TP overlap needs NVLink-class links
    allowed = w.supports if supports is None else supports
    for tp in (1, 2, 4, 8) if "tp" in allowed else (1,):  # powers of two: heads and GEMMs divide evenly
        if tp > hw.domain or hw.domain % tp:
            continue
        for cp in w.cp_choices if "cp" in allowed else (1,):
            if tp * cp > hw.world:
                continue
            for pp in _divisors(w.layers, 16) if "pp" in allowed else [1]:
                mp = tp * pp * cp
                if hw.world % mp:
                    continue
                dp = hw.world // mp
                for vp in [
                    v
                    for v in ((1, 2, 3, 4, 6, 8, 12) if "vp" in allowed else (1,))
                    if w.layers % (pp * v) == 0 and (v == 1 or pp > 1)
                ]:
                    for mbs in w.mbs_choices:
                        # interleaving needs GA divisible by PP: step GBS by DP x MBS x PP then
                        for g in _gbs_values(dp * mbs * (pp if vp > 1 else 1), lo, hi, gbs):
                            yield M.Candidate(
                                tp=tp,
                                pp=pp,
                                vp=vp,
                                cp=cp,
                                mbs=mbs,
                                gbs=g,
                                fp8=fp8,
                                tp_comm_overlap=overlap,
                                fsdp=fsdp,
                            )


def _dp_candidates(w: W.Workload, hw, k: dict, gbs: int | None):
    lo, hi = rcp.bs_range(w.name, RULESET)
    store = M.gnn_placement(hw, k) if w.name == "gnn" else ""
    if gbs is not None:
        if gbs % hw.world == 0:
            yield M.Candidate(mbs=gbs // hw.world, gbs=gbs, feature_store=store)
        return
    for b in sorted({*w.local_batches, *(2**i for i in range(12))}):
        g = b * hw.world
        if lo <= g <= hi:
            yield M.Candidate(mbs=b, gbs=g, feature_store=store)


def search_layouts(
    bench: str,
    hw,
    gbs: int | None = None,
    k: dict | None = None,
    supports: tuple[str, ...] | None = None,
    fsdp: bool = False,
    recompute: tuple[str, ...] | None = None,
) -> Plan:
    """All allowed layouts of `bench` on `hw`, fastest first. By default the search is over what the
    record implementations do (TP/PP/VP/CP for the transformers); `supports`, `fsdp` and
    `recompute` restrict it to what a given implementation can run (see best_config)."""
    w = W.get(bench)
    k = k or C.constants()
    if gbs is not None:
        if gbs < 1:
            raise ConfigError(f"--global-batch-size must be positive (got {gbs})")
        rcp.check_bs(w.name, gbs, RULESET)
    if w.precision == "fp8" and not hw.peak_tflops:
        raise ConfigError(f"system '{hw.name}' gives no peak_tflops for its accelerator")
    plan = Plan(bench=w.name, hardware=hw, options=[])
    gen = (
        _transformer_candidates(w, hw, k, gbs, supports, fsdp)
        if w.kind == "transformer"
        else _dp_candidates(w, hw, k, gbs)
    )
    options = []
    recomputes = recompute or (C.RECOMPUTE_ORDER if w.kind == "transformer" else ("none",))
    for c in gen:
        plan.considered += 1
        try:
            derive(
                SimpleNamespace(
                    tensor_model_parallel_size=c.tp,
                    pipeline_model_parallel_size=c.pp,
                    virtual_pipeline_model_parallel_size=c.vp,
                    context_parallel_size=c.cp,
                    global_batch_size=c.gbs,
                    micro_batch_size=c.mbs,
                ),
                hw.nodes,
                hw.per_node,
                hw.domain,
                w.layers or None,
                w.supports if supports is None else supports,
            )
        except ConfigError as e:
            reason = re.sub(r"\d+", "N", str(e).split(";")[0])
            plan.rejected[reason] = plan.rejected.get(reason, 0) + 1
            continue
        # the least recompute that fits is the only one worth keeping for a layout
        for rc in recomputes:
            c = replace(c, recompute=rc)
            mem = M.estimate(w, c, hw, k)
            if sum(mem.values()) <= hw.memory_gib:
                t = T.time_to_train(w, c, hw, k, RULESET)
                options.append(Option(c, mem, t, W.learning_rate(w, c.gbs)))
                break
        else:
            biggest = max(mem, key=mem.get)
            reason = (
                f"needs more than {hw.memory_gib:.0f} GiB per accelerator even with full recompute "
                f"(largest part: {biggest})"
                if w.kind == "transformer"
                else f"needs more than {hw.memory_gib:.0f} GiB per accelerator (largest part: {biggest})"
            )
            plan.rejected[reason] = plan.rejected.get(reason, 0) + 1
    plan.options = sorted(options, key=lambda o: o.minutes)
    if not plan.considered:
        lo, hi = rcp.bs_range(w.name, RULESET)
        raise ConfigError(
            f"no {w.name} layout on {hw.name}: {hw.world} accelerators need a global batch the "
            f"rules allow (RCPs cover {lo}..{hi}){' and that divides by DP' if gbs else ''}; "
            f"use fewer nodes{' or another --global-batch-size' if gbs else ''}"
        )
    if not plan.options:
        why = "; ".join(f"{n} x {r}" for r, n in sorted(plan.rejected.items(), key=lambda x: -x[1])[:2])
        raise ConfigError(
            f"no {w.name} layout fits on {hw.name} ({hw.world} x {hw.accelerator}, "
            f"{hw.memory_gib:.0f} GiB each): {why or 'no candidate'}"
        )
    return plan
