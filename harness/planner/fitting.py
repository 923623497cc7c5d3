"""Fitting the efficiency constants on published results, and the held-out errors. Used by
bench/fit_planner.py and bench/bench_planner_accuracy.py only (imports scipy; `mlperf plan` never
imports this module).

Each row is predicted as `mlperf plan --system-json` would: the best layout at its batch, on its
system, under its stack (harness.planner.calibration.predict). Inside the fit each row keeps the
`TOP` best candidates under the starting constants (re-ranked once after a first fit), so one
evaluation is a minimum over a few candidates rather than a search. The fit minimises squared
log errors (duplicate rows, e.g. one result published in three folders, share one weight) plus
a weak pull (`PRIOR_WEIGHT`) of each constant towards its start, so that a constant no remaining
row constrains stays sensible instead of running to a bound.

Constants: those of data/priors.yaml (per benchmark, with one default row for a benchmark without
its own; shared by several benchmarks; global); one `family` factor per accelerator family that
shares a stack with another family (gaudi and tpu run only their own stacks, so their stack factor
carries them); per (stack@version, benchmark) in the rows, except the reference stack (factors 1
by definition), a `stack_eff` factor on compute efficiency and a `stack_overhead` factor on the
per-step and per-evaluation overheads (held closer to 1: one NeMo release paid ~65 ms a step
where the next paid ~25 ms at the same per-sample time).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

import benchmarks
from harness.planner import calibration as C
from harness.planner import search as S
from harness.planner import stacks as ST
from harness.planner import timing as T
from harness.planner.hardware import load_data

PRIOR_WEIGHT = 0.05
OVERHEAD_PRIOR_WEIGHT = 0.3  # a stack's overhead factor moves only where its rows insist
STACK_TABLES = ("stack_eff", "stack_overhead")
TOP = 6


@cache
def priors() -> dict:
    """data/priors.yaml: the fitted constants' starting values and bounds."""
    return load_data("priors.yaml")


def benches(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The benchmarks with a priors row, then those of `extra` (published rows' names) without one."""
    out = list(priors()["benchmarks"])
    out += [b for b in dict.fromkeys(extra) if b not in out]
    return tuple(out)


def prior_table(names: Sequence[str]) -> tuple[tuple[str, str | None, float, float, float], ...]:
    """(key, sub-key or None, start, low, high) of every constant of `names`' fit, in a fixed order
    (the fit's parameter order): per benchmark (its row, else the default row), shared ('a+b': one
    constant of several benchmarks), global (sub-key None)."""
    d = priors()
    rows = {b: d["benchmarks"].get(b, d["default"]) for b in names}
    out = [(key, b, *rows[b][key]) for key in d["per_benchmark"] for b in names]
    out += [(s["key"], "+".join(s["benchmarks"]), *s["prior"]) for s in d.get("shared", [])]
    out += [(key, None, *v) for key, v in d.get("global", {}).items()]
    return tuple(out)


@dataclass(frozen=True)
class Param:
    key: str
    sub: str | None
    start: float
    lo: float
    hi: float
    bench: str | None = None
    """stack_eff: the benchmark of the (stack, benchmark) factor."""

    @property
    def name(self) -> str:
        return ".".join(x for x in (self.key, self.sub, self.bench) if x)


@dataclass
class RowCache:
    row: C.Published
    hw: object
    stack: ST.Stack
    workload: object
    candidates: list
    weight: float = 1.0


def params_for(rows: Sequence[C.Published], caches: dict) -> list[Param]:
    names = benches(r.bench for r in rows)
    out = [
        Param(*g)
        for g in prior_table(names)
        if any(r.bench in (g[1] or "").split("+") or g[1] is None for r in rows)
    ]
    ref = C.efficiency_file()["reference_stack"]
    fam_stacks: dict[str, set] = defaultdict(set)
    stack_fams: dict[str, set] = defaultdict(set)
    for r in rows:
        c = caches[r.id]
        fam_stacks[c.hw.family].add(c.stack.name)
        stack_fams[c.stack.name].add(c.hw.family)
    for fam in sorted(fam_stacks):
        if fam != "hopper" and any(len(stack_fams[s]) > 1 for s in fam_stacks[fam]):
            out.append(Param("family", fam, 1.0, 0.1, 3.0))
    combos = sorted({(caches[r.id].stack.key, r.bench) for r in rows} - {(ref, b) for b in names})
    out += [Param("stack_eff", key, 1.0, 0.05, 5.0, bench) for key, bench in combos]
    out += [Param("stack_overhead", key, 1.0, 0.1, 10.0, bench) for key, bench in combos]
    return out


def first_principles(extra: Iterable[str] = ()) -> dict:
    """The constants before any fit: fixed ones, data/priors.yaml's starting values (for the
    benchmarks with a row and those of `extra`), reference stack and Hopper factors 1. Never the
    shipped fit: fitted on every round, it would carry later rounds into a forward-in-time fit (as
    a start, a candidate shortlist, or the value of a constant no training row constrains, e.g. a
    benchmark absent from the earlier rounds)."""
    k = C.constants()
    names = benches(extra)
    for key, sub, x, *_ in prior_table(names):
        for name in (sub or "").split("+"):
            if isinstance(k.get(key), dict):
                k[key] = {**k[key], name: x}
            else:
                k[key] = x
    ref = C.efficiency_file()["reference_stack"]
    for tab in STACK_TABLES:
        k[tab] = {ref: dict.fromkeys(names, 1.0)}
    k["family"] = {"hopper": 1.0}
    return k


def to_constants(x: Sequence[float], params: Sequence[Param]) -> dict:
    ref = C.efficiency_file()["reference_stack"]  # only the reference and what is fitted here
    names = benches(_bench_names(params))
    over: dict = {"family": {"hopper": 1.0}}
    for tab in STACK_TABLES:
        over[tab] = {ref: dict.fromkeys(names, 1.0)}
    for p, v in zip(params, x):
        if p.key in STACK_TABLES:
            over[p.key][p.sub] = {**over[p.key].get(p.sub, {}), p.bench: float(v)}
        elif p.sub is None:
            over[p.key] = float(v)
        else:
            for name in p.sub.split("+"):
                over.setdefault(p.key, {})[name] = float(v)
    k = C._merge(first_principles(names), over)
    k["family"] = over["family"]  # only what was fitted (others: assumed 1, and said so)
    for tab in STACK_TABLES:
        k[tab] = over[tab]
    return k


def _bench_names(params: Sequence[Param]) -> list[str]:
    """The benchmarks `params` are constants of (a stack table's sub-key is a stack, a family's a family)."""
    out: list[str] = []
    for p in params:
        if p.key in STACK_TABLES:
            out.append(p.bench or "")
        elif p.key != "family" and p.sub:
            out += p.sub.split("+")
    return out


def row_constants(c: RowCache, k: dict) -> dict:
    f, used, _ = ST.factor(c.stack, c.row.bench, k)
    ovh = ST.factor(c.stack, c.row.bench, k, "stack_overhead")[0] if used != "reference" else 1.0
    return {**k, "stack_factor": f, "stack_overhead_factor": ovh}


def cache_row(row: C.Published, k: dict) -> RowCache:
    hw = row.hardware()
    stack = ST.recognise(hw)
    kr, _ = C.for_prediction(row.bench, hw, stack, k)
    bench = benchmarks.get(row.bench)  # a published row names its benchmark (data): the object here
    plan = S.search_layouts(bench, hw, gbs=row.gbs, k=kr, stack=stack, ruleset=row.ruleset)
    return RowCache(row, hw, stack, plan.workload, [o.candidate for o in plan.options[:TOP]])


def predict_cached(c: RowCache, k: dict) -> float:
    kr = row_constants(c, k)
    return min(
        T.time_to_train(c.workload, cand, c.hw, kr, c.row.ruleset)["predicted_min"] for cand in c.candidates
    )


def _weights(rows: Sequence[C.Published]) -> dict[str, float]:
    n = Counter((r.system_key, r.bench, r.round, r.score_min) for r in rows)
    return {r.id: 1 / n[(r.system_key, r.bench, r.round, r.score_min)] for r in rows}


def fit(
    rows: Sequence[C.Published], start: dict | None = None, rounds: int = 2, caches: dict | None = None
) -> dict:
    """Constants fitted on `rows` (a flat constants dict, with stack_eff and family). `caches`
    (row id -> RowCache) skips the candidate searches (held-out folds reuse the full fit's)."""
    import numpy as np
    from scipy.optimize import least_squares

    if start is None:  # from the first-principles starting values, not the shipped fit
        k = first_principles(r.bench for r in rows)
    else:
        k = start
    w = _weights(rows)
    for i in range(rounds):
        if caches is None or i > 0:
            caches = {r.id: cache_row(r, k) for r in rows}
        params = params_for(rows, caches)
        x0 = np.array([_value(k, p) for p in params])
        lo = np.array([p.lo for p in params])
        hi = np.array([p.hi for p in params])
        x0 = np.clip(x0, lo * 1.0001, hi * 0.9999)
        prior = np.array([p.start for p in params])
        weight = np.array(
            [OVERHEAD_PRIOR_WEIGHT if p.key == "stack_overhead" else PRIOR_WEIGHT for p in params]
        )
        sparsity = _sparsity(rows, caches, params)

        def residuals(x, params=params, caches=caches, prior=prior, weight=weight):
            kk = to_constants(x, params)
            r = [
                math.sqrt(w[row.id]) * math.log(predict_cached(caches[row.id], kk) / row.score_min)
                for row in rows
            ]
            return np.array(r + list(weight * np.log(x / prior)))

        res = least_squares(
            residuals, x0, bounds=(lo, hi), x_scale="jac", jac_sparsity=sparsity, max_nfev=300, xtol=1e-6
        )
        k = to_constants(res.x, params)
    return k


def _value(k: dict, p: Param) -> float:
    if p.key in STACK_TABLES:
        return float(k.get(p.key, {}).get(p.sub, {}).get(p.bench, p.start))
    v = k.get(p.key, p.start)
    if isinstance(v, dict):
        return float(v.get((p.sub or "").split("+")[0], p.start))
    return float(v)


def _sparsity(rows, caches, params):
    """Which residual each constant can move (rows of its benchmark / family / stack)."""
    import numpy as np

    m = np.zeros((len(rows) + len(params), len(params)))
    for j, p in enumerate(params):
        for i, r in enumerate(rows):
            c = caches[r.id]
            if p.key in STACK_TABLES:
                hit = p.bench == r.bench and p.sub.split("@")[0] in (c.stack.name, *_fallbacks(c.stack.name))
            elif p.key == "family":
                hit = c.hw.family == p.sub
            elif p.sub is None:
                hit = True
            else:
                hit = r.bench in p.sub.split("+")
            m[i, j] = 1.0 if hit else 0.0
        m[len(rows) + j, j] = 1.0
    return m


def _fallbacks(name: str) -> list[str]:
    out, seen = [], {name}
    fb = ST.definitions().get(name, {}).get("fallback")
    while fb and fb not in seen:
        out.append(fb)
        seen.add(fb)
        fb = ST.definitions().get(fb, {}).get("fallback")
    return out


def ape(pred: float, actual: float) -> float:
    return abs(pred - actual) / actual * 100


def summary(errors: Sequence[float]) -> tuple[float, float]:
    """(median, p90) of absolute percentage errors (p90 by linear interpolation)."""
    e = sorted(errors)
    if not e:
        return float("nan"), float("nan")
    q = 0.9 * (len(e) - 1)
    lo = math.floor(q)
    p90 = e[lo] + (e[min(lo + 1, len(e) - 1)] - e[lo]) * (q - lo)
    return statistics.median(e), p90


def groups(rows: Sequence[C.Published], by: str) -> dict[str, list[C.Published]]:
    """'system': the same system across rounds (submitter + system name); 'submitter': every
    submitter with more than one row (single-row submitters are covered by 'system')."""
    out: dict[str, list] = defaultdict(list)
    for r in rows:
        out[r.system_key if by == "system" else r.submitter].append(r)
    if by == "submitter":
        out = {g: rs for g, rs in out.items() if len(rs) > 1}
    return dict(out)


def held_out(rows: Sequence[C.Published], by: str, start: dict, log=None) -> dict[str, float]:
    """Prediction of each row (of a group with a fold) from constants fitted on all other groups'
    rows, through the full search (the path a user's `mlperf plan` takes). Each fold starts from
    `start` (the all-rows fit) and keeps its candidate shortlists; only the constants are refitted."""
    caches = {r.id: cache_row(r, start) for r in rows}
    out = {}
    for name, members in groups(rows, by).items():
        ids = {r.id for r in members}
        train = [r for r in rows if r.id not in ids]
        k = fit(train, start=_without(start, train, caches), rounds=1, caches=caches)
        for r in members:
            out[r.id] = S.predict(r, k)
        if log:
            log(f"  fold {by} {name}: {len(members)} row(s)")
    return out


def _without(k: dict, train, caches) -> dict:
    """`k` less the stack and family factors that no training row supports (a held-out stack must
    not keep the factor fitted on its own rows)."""
    keep = {(caches[r.id].stack.key, r.bench) for r in train}
    fams = {caches[r.id].hw.family for r in train}
    out = dict(k)
    ref = C.efficiency_file()["reference_stack"]
    for table in STACK_TABLES:
        out[table] = {
            key: {b: v for b, v in d.items() if (key, b) in keep or key == ref}
            for key, d in k.get(table, {}).items()
        }
        out[table] = {key: d for key, d in out[table].items() if d}
    out["family"] = {f: v for f, v in k.get("family", {}).items() if f in fams or f == "hopper"}
    return out


def fitted_on(rows: Sequence[C.Published], k: dict) -> dict[str, list[str]]:
    """For each fitted constant, the ids of the rows it was fitted on."""
    out: dict[str, list[str]] = {"global": [r.id for r in rows]}
    for r in rows:
        hw = r.hardware()
        st = ST.recognise(hw)
        if st.key in k.get("stack_eff", {}) and r.bench in k["stack_eff"][st.key]:
            out.setdefault(f"stack_eff+stack_overhead {st.key} {r.bench}", []).append(r.id)
        if hw.family in k.get("family", {}) and hw.family != "hopper":
            out.setdefault(f"family {hw.family}", []).append(r.id)
    return out


def import_fixture(root) -> list[dict]:
    """data/published.yaml rows from `root`, a folder of the published MLPerf Training v3.0-v4.0
    results: scores.csv (one row per result folder, the official result summarizer's score, and
    `system_json`, the path under root of that row's published system-description JSON), keeping
    the layouts of the current file's rows."""
    import csv
    import json
    from pathlib import Path

    root = Path(root)
    layouts = {r.id: list(r.layout) for r in C.published() if r.layout}
    keep = ("cuda", "deepspeed", "jax", "pax", "libtpu", "synapse", "praxis")
    out = []
    for r in csv.DictReader(open(root / "scores.csv")):
        d = json.loads((root / r["system_json"]).read_text())
        sw = d.get("other_software_stack") or ""
        sw = (sw[0] if sw else "") if isinstance(sw, list) else sw
        if isinstance(sw, dict):
            sw = {
                key: str(v)
                for key, v in sw.items()
                if any(t in key.lower() for t in keep) and "driver" not in key.lower()
            }
        row = {
            "id": f"{r['round']}/{r['submitter_folder']}/{r['system_folder']}/{r['benchmark']}",
            "round": r["round"],
            "ruleset": r["ruleset"],
            "submitter": r["submitter"],
            "system": r["system_folder"],
            "bench": r["benchmark"],
            "accelerator": r["accelerator_model_name"],
            "nodes": int(r["number_of_nodes"]),
            "per_node": int(d["accelerators_per_node"]),
            "gbs": int(float(r["global_batch_size"])),
            "score_min": round(float(r["score_min"]), 4),
            "framework": d.get("framework", ""),
            "software": sw,
            "memory": d.get("accelerator_memory_capacity", ""),
        }
        if row["id"] in layouts:
            row["layout"] = layouts[row["id"]]
        out.append(row)
    return out


# ---- the baseline: time = a x accelerators^b per (benchmark, accelerator) -------------------------
def power_law(train: Sequence[C.Published], row: C.Published) -> float:
    """Fit log t = log a + b log n on the rows of the same benchmark and accelerator; with one row
    assume b = -1 (linear scaling); with none, use the benchmark's rows on any accelerator."""
    from harness.planner.hardware import lookup

    acc = (lookup(row.accelerator) or {}).get("name", row.accelerator)
    same = [r for r in train if r.bench == row.bench and (lookup(r.accelerator) or {}).get("name") == acc]
    if not same:
        same = [r for r in train if r.bench == row.bench]
    if not same:
        return float("nan")
    xs = [math.log(r.world) for r in same]
    ys = [math.log(r.score_min) for r in same]
    if len(set(xs)) < 2:
        b = -1.0
        a = statistics.mean(y - b * x for x, y in zip(xs, ys))
    else:
        mx, my = statistics.mean(xs), statistics.mean(ys)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        a = my - b * mx
    return math.exp(a + b * math.log(row.world))


def baseline_held_out(rows: Sequence[C.Published], by: str) -> dict[str, float]:
    out = {}
    for members in groups(rows, by).values():
        ids = {r.id for r in members}
        train = [r for r in rows if r.id not in ids]
        out.update({r.id: power_law(train, r) for r in members})
    return out
