"""Forward in time: how the planner does on a round it has not seen, fitted on the rounds before.

    from harness.planner import forward
    doc = forward.forward(rows)     # rows: calibration.Published of several rounds

One step per round after the first: fit on every earlier round (from the first-principles
starting values, so nothing of a later round leaks in through the start), predict this one
through the full search (what `mlperf plan --system-json` does). Each test row's log residual
and its novelty reasons against its training rows (interval.novelty) feed the 80 % interval
constants (interval.fit): the shipped ones from every step, and held-out ones from the steps
before the last, whose coverage on the last step is the figure reported. Used by
bench/bench_planner_accuracy.py and its test (imports scipy through fitting; `mlperf plan` never
imports it).
"""

from __future__ import annotations

import math

from harness.planner import fitting as F
from harness.planner import interval as I
from harness.planner import search as SE


def errors(pairs) -> dict:
    """(prediction, row) pairs -> median and p90 APE, mean signed % error, rows."""
    ape = [F.ape(p, r.score_min) for p, r in pairs]
    signed = [(p - r.score_min) / r.score_min * 100 for p, r in pairs]
    med, p90 = F.summary(ape)
    return {
        "median_ape": round(med, 2),
        "p90_ape": round(p90, 2),
        "mean_signed_pct": round(sum(signed) / len(signed), 2) if signed else None,
        "rows": len(pairs),
    }


def by_group(pairs, key) -> dict:
    groups: dict = {}
    for p, r in pairs:
        groups.setdefault(key(r), []).append((p, r))
    return {g: errors(v) for g, v in sorted(groups.items())}


def forward_chain(rows) -> tuple[list[dict], list]:
    """One step per round after the first: fit on every earlier round, predict this one. Returns
    the steps' figures and every test row as (prediction, row, log residual, reasons, step)."""
    rounds = sorted({r.round for r in rows}, key=lambda x: tuple(int(v) for v in x[1:].split(".")))
    steps, out = [], []
    for i in range(1, len(rounds)):
        train = [r for r in rows if r.round in rounds[:i]]
        test = [r for r in rows if r.round == rounds[i]]
        k = F.fit(train, start=None)
        ref = I.reference(train)
        pairs = []
        for r in test:
            p = SE.predict(r, k)
            reasons = [x for x, _ in I.novelty(r.bench, r.hardware(), r.stack(), ref)]
            pairs.append((p, r))
            out.append((p, r, math.log(p / r.score_min), reasons, rounds[i]))
        steps.append(
            {
                "fit_on": f"{rounds[0]}-{rounds[i - 1]}" if i > 1 else rounds[0],
                "predict": rounds[i],
                "fitted_rows": len(train),
                "overall": errors(pairs),
                "by_benchmark": by_group(pairs, lambda r: r.bench),
                "by_family": by_group(pairs, lambda r: r.hardware().family),
                "by_stack": by_group(pairs, lambda r: r.stack().name),
            }
        )
    return steps, out


def coverage(test, k) -> float:
    """Share of rows whose published time lies inside the interval from constants `k`."""
    inside = [lo <= r.score_min <= hi for p, r, _e, rs, _s in test for lo, hi in [I.range_min(p, rs, k)]]
    return round(100 * sum(inside) / len(inside), 1)


def forward(rows) -> dict:
    """The steps' figures, the shipped interval constants, the held-out coverage and each
    forward prediction (row id -> minutes)."""
    steps, res = forward_chain(rows)
    last = steps[-1]["predict"]
    earlier = [(e, rs) for _p, _r, e, rs, s in res if s != last]
    final = [x for x in res if x[4] == last]
    held_k = I.fit(earlier)
    shipped = I.fit([(e, rs) for _p, _r, e, rs, _s in res])
    return {
        "steps": steps,
        "interval": shipped,
        "coverage_80": {
            f"{last}_held_out": coverage(final, held_k),
            f"{last}_held_out_constants": held_k,
            "all_steps_in_sample": coverage(res, shipped),
        },
        "rows": {f"{p_r[1].id}": round(p_r[0], 3) for p_r in res},
    }
