"""Fitting the efficiency constants, and the per-accelerator power-law baseline they are judged
against. Used by bench/fit_planner.py and bench/bench_planner_accuracy.py only (imports scipy;
`mlperf plan` never imports this module).

The fit minimises squared log errors of predicted vs published minutes, plus a weak pull
(`PRIOR_WEIGHT`) of each constant towards its first-principles starting value so that a constant no
remaining row constrains (e.g. gpt3's per-step overhead when a gpt3 row is held out) stays sensible
instead of running to a bound.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from harness.planner import calibration as C

# (key, sub-key or None, start, low, high)
PARAMS: tuple[tuple[str, str | None, float, float, float], ...] = (
    ("mfu", "gpt3", 0.42, 0.05, 1.0),
    ("mfu", "llama2_70b_lora", 0.42, 0.05, 1.0),
    ("mfu", "gnn", 0.1, 1e-3, 1.0),
    ("mfu", "stable_diffusion", 0.3, 0.02, 1.0),
    ("step_overhead_s", "gpt3", 0.05, 1e-4, 5.0),
    ("step_overhead_s", "llama2_70b_lora", 0.2, 1e-4, 5.0),
    ("step_overhead_s", "gnn", 0.045, 1e-4, 1.0),
    ("step_overhead_s", "stable_diffusion", 0.02, 1e-4, 1.0),
    ("dp_overlap", None, 0.5, 0.0, 1.0),
    ("eval_overhead_s", "gpt3+llama2_70b_lora", 0.5, 1e-3, 10.0),
    ("tp_exposed_no_overlap", None, 1.0, 0.2, 1.0),
    ("gather_eff", None, 0.5, 0.01, 1.0),
    ("family", "ada", 0.7, 0.1, 2.0),
)
PRIOR_WEIGHT = 0.05


def to_constants(x: Sequence[float]) -> dict:
    over: dict = {}
    for (key, sub, *_), v in zip(PARAMS, x):
        if sub is None:
            over[key] = float(v)
        else:
            for name in sub.split("+"):  # 'a+b': one constant shared by several benchmarks
                over.setdefault(key, {})[name] = float(v)
    return C.constants(over)


def value(k: dict, key: str, sub: str | None) -> float:
    return k[key] if sub is None else k[key][sub.split("+")[0]]


def fit(rows: Sequence[C.Published]) -> dict:
    """Constants fitted on `rows` (a flat constants dict)."""
    import numpy as np
    from scipy.optimize import least_squares

    x0 = np.array([p[2] for p in PARAMS])
    lo = np.array([p[3] for p in PARAMS])
    hi = np.array([p[4] for p in PARAMS])

    def residuals(x):
        k = to_constants(x)
        r = [math.log(C.predict(row, k) / row.score_min) for row in rows]
        r += list(PRIOR_WEIGHT * np.log(x / x0))
        return r

    res = least_squares(residuals, x0, bounds=(lo, hi), x_scale="jac", max_nfev=2000)
    return to_constants(res.x)


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


def leave_one_out(rows: Sequence[C.Published]) -> dict[str, float]:
    """Prediction for each row from constants fitted on all the other rows."""
    out = {}
    for i, row in enumerate(rows):
        k = fit([r for j, r in enumerate(rows) if j != i])
        out[row.id] = C.predict(row, k)
    return out


# ---- the baseline: time = a x accelerators^b per (benchmark, accelerator) -------------------------
def power_law(train: Sequence[C.Published], row: C.Published) -> float:
    """Fit log t = log a + b log n on the rows of the same benchmark and accelerator; with one row
    assume b = -1 (linear scaling); with none, use the benchmark's rows on any accelerator."""
    same = [r for r in train if r.bench == row.bench and r.accelerator == row.accelerator]
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


def baseline_in_sample(rows: Sequence[C.Published]) -> dict[str, float]:
    return {r.id: power_law(rows, r) for r in rows}


def baseline_leave_one_out(rows: Sequence[C.Published]) -> dict[str, float]:
    return {r.id: power_law([o for o in rows if o.id != r.id], r) for r in rows}
