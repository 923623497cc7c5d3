"""Layout search: enumerate the candidates the rules allow, drop those that do not fit memory (with
the reason), predict the rest, rank by predicted time-to-train.

Model-parallel workloads: TP (divisors of the NVLink domain), PP (divisors of the layer count), VP
(interleaving; layers must split into PP x VP equal chunks), CP, MBS, and GA -> GBS. Data-parallel
workloads: the per-accelerator batch (GBS = world x batch). Every candidate goes through
`harness.core.layout.derive`, the one place layouts are checked; the GBS must lie in the range the
official RCPs cover, and a learning rate the rules tie to the GBS follows from it (cost model).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from math import prod
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import benchmarks
from benchmarks.costs import Workload
from harness.core.errors import ConfigError
from harness.core.layout import derive
from harness.planner import calibration as C
from harness.planner import memory as M
from harness.planner import rcp
from harness.planner import stacks as S
from harness.planner import timing as T
from harness.planner import workloads as W

if TYPE_CHECKING:
    from benchmarks.benchmark import Benchmark

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

    def overrides(self, w: Workload) -> dict:
        c = self.candidate
        out = {"global_batch_size": c.gbs, "micro_batch_size": c.mbs}
        if w.kind == "model_parallel":
            out.update(
                tensor_model_parallel_size=c.tp,
                pipeline_model_parallel_size=c.pp,
                virtual_pipeline_model_parallel_size=c.vp,
                context_parallel_size=c.cp,
            )
            if w.moe is not None:
                out["expert_model_parallel_size"] = c.ep
        if self.lr is not None:
            out["opt_base_learning_rate"] = self.lr
        return out


@dataclass
class Plan:
    bench: Benchmark
    hardware: object
    options: list[Option]
    rejected: dict[str, int] = field(default_factory=dict)
    """Reason -> number of candidates dropped for it."""
    considered: int = 0
    stack: S.Stack | None = None
    constants: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    workload: Workload | None = None
    ruleset: str = RULESET


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


@dataclass(frozen=True)
class Policy:
    """What the implementation under a stack does, for every candidate of one search."""

    impl: str = "record"
    supports: tuple[str, ...] = ("tp", "pp", "vp", "cp")
    fsdp: bool = False
    recompute: tuple[str, ...] = C.RECOMPUTE_ORDER
    fp8: bool = True
    tp_comm_overlap: bool = True
    distributed_optimizer: bool = True
    feature_store: str = ""


def implementation(bench: Benchmark) -> dict:
    """What the harness's own implementation (its typed config class) can run: its parallel
    degrees (`SUPPORTS`), whether it shards weights with FSDP, and its recompute modes."""
    cls = bench.config  # config modules never import torch
    fields = cls.model_fields
    out: dict = {"supports": tuple(getattr(cls, "SUPPORTS", ())), "fsdp": False, "recompute": None}
    if "fsdp" in fields:
        out["fsdp"] = bool(fields["fsdp"].default)
    if "activation_checkpointing" in fields:  # on/off switch: 'full' when on by default
        out["recompute"] = ("full",) if fields["activation_checkpointing"].default else ("none",)
    return out


def policy(w: Workload, hw, stack: S.Stack, k: dict, supports=None, fsdp=None, recompute=None) -> Policy:
    fp8 = hw.has_fp8() and stack.uses_fp8() and w.precision == "fp8"
    if stack.name == "mlperf-harness":
        assert w.bench is not None
        impl = implementation(w.bench)
        cfg = w.cfg
        on_gpu = hw.kind != "cpu"
        harness: dict[str, Any] = {  # what the harness's config runs, then what its cost model adds
            "distributed_optimizer": bool(getattr(cfg, "distributed_optimizer", False)),
            **w.cost.policy(w, hw, k, "harness"),
        }
        return Policy(
            impl="harness",
            supports=tuple(impl["supports"] if supports is None else supports),
            fsdp=bool(getattr(cfg, "fsdp", False)) if fsdp is None else fsdp,
            recompute=recompute or impl["recompute"] or C.RECOMPUTE_ORDER,
            fp8=on_gpu and hw.has_fp8() and bool(getattr(cfg, "fp8", False)),
            tp_comm_overlap=on_gpu and bool(getattr(cfg, "tp_comm_overlap", False)),
            **harness,
        )
    layouts = stack.layouts if supports is None else supports
    if layouts is not None and w.moe is not None and supports is None:
        layouts = (*layouts, "ep")  # every record MoE implementation splits its experts
    return Policy(
        impl="record",
        supports=tuple(w.supports if layouts is None else layouts),
        fsdp=bool(stack.features.get("sharded_weights")) if fsdp is None else fsdp,
        recompute=recompute or (C.RECOMPUTE_ORDER if w.kind == "model_parallel" else ("none",)),
        fp8=fp8,
        tp_comm_overlap=hw.intra_gbs >= 100,  # userbuffer TP overlap needs NVLink-class links
        **w.cost.policy(w, hw, k, "record"),
    )


def _candidate(pol: Policy, **layout) -> M.Candidate:
    return M.Candidate(
        fp8=pol.fp8,
        tp_comm_overlap=pol.tp_comm_overlap,
        fsdp=pol.fsdp,
        distributed_optimizer=pol.distributed_optimizer,
        feature_store=pol.feature_store,
        impl=pol.impl,
        **layout,
    )


def _model_parallel_candidates(w: Workload, hw, pol: Policy, gbs: int | None, ruleset: str):
    lo, hi = rcp.bs_range(w.bench, ruleset)
    allowed = pol.supports
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
                    for ep in _ep_choices(w, pol, tp * cp * dp):
                        for mbs in w.mbs_choices:
                            # interleaving needs GA divisible by PP: step GBS by DP x MBS x PP then
                            for g in _gbs_values(dp * mbs * (pp if vp > 1 else 1), lo, hi, gbs):
                                yield _candidate(pol, tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, mbs=mbs, gbs=g)


def _ep_choices(w: Workload, pol: Policy, attention_ranks: int) -> tuple[int, ...]:
    """EP degrees for a MoE workload: those dividing the experts and TP x CP x DP (expert TP 1)."""
    if w.moe is None or "ep" not in pol.supports:
        return (1,)
    return tuple(e for e in w.moe.ep_choices if attention_ranks % e == 0)


def _dp_candidates(w: Workload, hw, pol: Policy, gbs: int | None, ruleset: str):
    lo, hi = rcp.bs_range(w.bench, ruleset)
    if gbs is not None:
        if gbs % hw.world == 0:
            yield _candidate(pol, mbs=gbs // hw.world, gbs=gbs)
        return
    for b in sorted({*w.local_batches, *(2**i for i in range(12))}):
        g = b * hw.world
        if lo <= g <= hi:
            yield _candidate(pol, mbs=b, gbs=g)


def _check(c: M.Candidate, w: Workload, hw, supports) -> None:
    derive(
        SimpleNamespace(
            tensor_model_parallel_size=c.tp,
            pipeline_model_parallel_size=c.pp,
            virtual_pipeline_model_parallel_size=c.vp,
            context_parallel_size=c.cp,
            expert_model_parallel_size=c.ep,
            global_batch_size=c.gbs,
            micro_batch_size=c.mbs,
        ),
        hw.nodes,
        hw.per_node,
        hw.domain,
        w.layers or None,
        supports,
    )


def _largest(w: Workload, hw, pol: Policy, gbs: int | None, ruleset: str) -> int:
    """The most nodes of `hw`'s kind on which some candidate layout exists (0: none at all)."""
    gen = _model_parallel_candidates if w.kind == "model_parallel" else _dp_candidates
    for n in range(hw.nodes - 1, 0, -1):  # each probe only starts a generator: cheap
        if next(iter(gen(w, replace(hw, nodes=n), pol, gbs, ruleset)), None) is not None:
            return n
    return 0


def _no_layout(w: Workload, hw, pol: Policy, gbs: int | None, ruleset: str) -> str:
    """Why no layout can exist, in the implementation's terms, and the largest size that works."""
    _, hi = rcp.bs_range(w.bench, ruleset)
    split = sorted(x.upper() for x in pol.supports)
    what = ("data-parallel + " + " + ".join(split)) if split else "data-parallel only"
    parts = {}  # the most ways each model-parallel degree can split one sample
    if w.kind == "model_parallel":
        parts["TP"] = max(t for t in (1, 2, 4, 8) if t <= hw.domain) if "tp" in pol.supports else 1
        parts["PP"] = max(_divisors(w.layers, 16)) if "pp" in pol.supports and w.layers else 1
        parts["CP"] = max(w.cp_choices) if "cp" in pol.supports else 1
    parts = {k: v for k, v in parts.items() if v > 1}
    most = prod(parts.values())
    if gbs:
        cause = f"--global-batch-size {gbs} does not split into whole samples over {hw.world} accelerators"
    elif hw.world > hi * most:
        cause = (
            f"{hw.world} accelerators would each hold less than one sample of the largest global "
            f"batch the RCPs cover ({hi}){', split by ' + ' x '.join(f'{k} {v}' for k, v in parts.items()) if parts else ''}"
        )
    else:
        cause = f"no split of {hw.world} accelerators gives a global batch the RCPs cover (up to {hi})"
    head = f"no {w.name} layout on {hw.name} ({what}): {cause}"
    n = _largest(w, hw, pol, gbs, ruleset)
    if not n:
        return (
            f"{head}; no node count of this system works{'; try another --global-batch-size' if gbs else ''}"
        )
    return f"{head}; at most {n * hw.per_node} accelerators ({n} node{'s' * (n > 1)} of {hw.per_node}): use fewer nodes"


def fit_least_recompute(w, c, hw, k, recomputes):
    """(candidate with the least recompute that fits, its memory) or (None, memory of the last)."""
    mem = {}
    model = M.model_bytes(w, c, hw) if w.kind == "model_parallel" else None
    for rc in recomputes:
        c = M.with_recompute(c, rc)
        mem = M.estimate(w, c, hw, k, model)
        if sum(mem.values()) <= hw.memory_gib:
            return c, mem
    return None, mem


def search_layouts(
    bench: Benchmark,
    hw,
    gbs: int | None = None,
    k: dict | None = None,
    supports: tuple[str, ...] | None = None,
    fsdp: bool | None = None,
    recompute: tuple[str, ...] | None = None,
    stack: S.Stack | None = None,
    ruleset: str = RULESET,
    workload: Workload | None = None,
    user: dict | None = None,
) -> Plan:
    """All allowed layouts of `bench` on `hw`, fastest first, for the implementation of `stack`
    (default: the system's own stack, harness.planner.stacks.recognise). `supports`, `fsdp` and
    `recompute` restrict it further (see best_config)."""
    w = workload or W.get(bench)
    stack = stack or S.recognise(hw)
    notes: list[str] = []
    if k is None:
        k, notes = C.for_prediction(w.name, hw, stack, user=user)
    if gbs is not None:
        if gbs < 1:
            raise ConfigError(f"--global-batch-size must be positive (got {gbs})")
        rcp.check_bs(bench, gbs, ruleset)
    pol = policy(w, hw, stack, k, supports, fsdp, recompute)
    plan = Plan(bench, hw, [], stack=stack, constants=k, notes=notes, workload=w, ruleset=ruleset)
    gen = (
        _model_parallel_candidates(w, hw, pol, gbs, ruleset)
        if w.kind == "model_parallel"
        else _dp_candidates(w, hw, pol, gbs, ruleset)
    )
    options = []
    recomputes = pol.recompute if w.kind == "model_parallel" else ("none",)
    mem: dict = {}
    memo: dict = {}
    checked: dict = {}
    for c in gen:
        plan.considered += 1
        unit = c.dp(hw.world) * c.mbs  # derive's checks depend on the GBS only through these
        ckey = (c.tp, c.pp, c.vp, c.cp, c.ep, c.mbs, c.gbs % unit, (c.gbs // unit) % c.pp if c.vp > 1 else 0)
        if ckey not in checked:
            try:
                _check(c, w, hw, pol.supports)
                checked[ckey] = None
            except ConfigError as e:
                checked[ckey] = re.sub(r"\d+", "N", str(e).split(";")[0])
        if checked[ckey]:
            plan.rejected[checked[ckey]] = plan.rejected.get(checked[ckey], 0) + 1
            continue
        key = M.memory_key(w, c, hw.world) if w.kind == "model_parallel" else None
        if key is not None and key in memo:  # the same layout at another GBS: same memory
            rc, mem = memo[key]
            fits = M.with_recompute(c, rc) if rc else None
        else:
            fits, mem = fit_least_recompute(w, c, hw, k, recomputes)
            if key is not None:
                memo[key] = (fits.recompute if fits else None, mem)
        if fits is not None:
            t = T.time_to_train(w, fits, hw, k, ruleset)
            options.append(Option(fits, mem, t, w.cost.learning_rate(w, fits.gbs)))
            continue
        biggest = max(mem, key=mem.get)
        extra = " even with full recompute" if "full" in recomputes else ""
        reason = f"needs more than {hw.memory_gib:.0f} GiB per accelerator{extra} (largest part: {biggest})"
        plan.rejected[reason] = plan.rejected.get(reason, 0) + 1
    plan.options = sorted(options, key=lambda o: o.minutes)
    if not plan.considered:
        raise ConfigError(_no_layout(w, hw, pol, gbs, ruleset))
    if not plan.options:
        why = "; ".join(f"{n} x {r}" for r, n in sorted(plan.rejected.items(), key=lambda x: -x[1])[:2])
        raise ConfigError(
            f"no {w.name} layout fits on {hw.name} ({hw.world} x {hw.accelerator}, "
            f"{hw.memory_gib:.0f} GiB each): {why or 'no candidate'}"
        )
    return plan


def price(
    w: Workload,
    hw,
    layout,
    stack: S.Stack,
    user: dict | None = None,
    recompute: str = "none",
    ruleset: str = RULESET,
) -> Plan:
    """One given run (a resolved config's layout) priced under `stack`: a Plan with one option.
    A layout that does not fit memory is kept, with a note (the run itself would find out)."""
    k, notes = C.for_prediction(w.name, hw, stack, user=user)
    pol = policy(w, hw, stack, k)
    c = _candidate(
        pol,
        tp=layout.tp,
        pp=layout.pp,
        vp=layout.vp,
        cp=layout.cp,
        ep=getattr(layout, "ep", 1),
        mbs=layout.micro_batch_size,
        gbs=layout.global_batch_size,
        recompute=recompute,
    )
    mem = M.estimate(w, c, hw, k)
    if sum(mem.values()) > hw.memory_gib:
        notes.append(
            f"this layout needs {sum(mem.values()):.1f} GiB per accelerator, more than {hw.memory_gib:.0f}"
        )
    t = T.time_to_train(w, c, hw, k, ruleset, tiny=(user or {}).get("tiny"))
    assert w.bench is not None
    plan = Plan(
        w.bench,
        hw,
        [Option(c, mem, t, None)],
        considered=1,
        stack=stack,
        constants=k,
        notes=notes,
        workload=w,
        ruleset=ruleset,
    )
    return plan


def predict(row: C.Published, k: dict, stack: S.Stack | None = None) -> float:
    """Predicted minutes for a published row: the best layout at its batch on its system."""
    hw = row.hardware()
    stack = stack or S.recognise(hw)
    kr, _ = C.for_prediction(row.bench, hw, stack, k)
    bench = benchmarks.get(row.bench)  # a published row names its benchmark (data): the object here
    return search_layouts(bench, hw, gbs=row.gbs, k=kr, stack=stack, ruleset=row.ruleset).options[0].minutes
