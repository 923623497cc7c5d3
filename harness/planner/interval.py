"""The 80 % prediction interval of a planned time-to-train, and why it is as wide as it is.

    lo, hi = interval.range_min(predicted, reasons)       # minutes
    reasons = interval.novelty(bench, hw, stack, reference_rows)

Spread model (log space, actual = predicted x exp(-e)): e ~ bias + sigma x z, with
sigma^2 = sigma_seen^2 + sum of sigma_<reason>^2 over the reasons the system is outside the data
the constants were fitted on:
  new_accelerator      its accelerator model is in no fitted row (a new chip: datasheet peaks,
                       its family's efficiency assumed)
  new_stack            its software stack is in no fitted row (its factor assumed 1)
  new_stack_version    the stack is known but not this release (the nearest release's factor)
  beyond_scale         more accelerators than any fitted row of the benchmark
The constants (bias, sigma_seen and one sigma per reason: 6 in all) are estimated by
bench/bench_planner_accuracy.py from forward-chaining residuals (fit on rounds before, predict the
next) and stored in data/accuracy.yaml `interval`; z = 1.2816 (10 % in each tail). A reason
with no forward-chaining row gets sigma_seen again (the variance doubled) and says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import cache

Z80 = 1.2816  # standard normal 90th percentile: an 80 % two-sided interval
REASONS = ("new_accelerator", "new_stack", "new_stack_version", "beyond_scale")
WHY = {
    "new_accelerator": "accelerator {acc} is in no fitted row (datasheet peaks, family efficiency assumed)",
    "new_stack": "stack {stack} is in no fitted row (its factor assumed 1)",
    "new_stack_version": "stack release {stack} is in no fitted row (the nearest release's factor)",
    "beyond_scale": "{world} accelerators, more than any fitted {bench} row ({most})",
}


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def reference(rows: Iterable) -> dict:
    """What a set of published rows covers: accelerators, stack names and releases, and the
    largest world per benchmark (rows: calibration.Published)."""
    accs, stacks, keys, most = set(), set(), set(), {}
    for r in rows:
        hw = r.hardware()
        st = r.stack()
        accs.add(_norm(hw.accelerator))
        stacks.add(st.name)
        keys.add(st.key)
        most[r.bench] = max(most.get(r.bench, 0), r.world)
    return {"accelerators": accs, "stacks": stacks, "stack_keys": keys, "most": most}


@cache
def fitted_reference() -> dict:
    """The coverage of the rows the shipped constants were fitted on (data/published.yaml)."""
    from harness.planner import calibration as C

    return reference(C.published())


def novelty(bench: str, hw, stack, ref: dict | None = None) -> list[tuple[str, str]]:
    """[(reason, one line why)] for a prediction outside the fitted data; [] inside it."""
    ref = ref or fitted_reference()
    out = []
    if _norm(hw.accelerator) not in ref["accelerators"]:
        out.append(("new_accelerator", WHY["new_accelerator"].format(acc=hw.accelerator)))
    if stack.name not in ref["stacks"]:
        out.append(("new_stack", WHY["new_stack"].format(stack=stack.key)))
    elif stack.key not in ref["stack_keys"]:
        what = stack.key if stack.version else f"{stack.name} (release not recognised)"
        out.append(("new_stack_version", WHY["new_stack_version"].format(stack=what)))
    most = ref["most"].get(bench, 0)
    if hw.world > most:
        out.append(("beyond_scale", WHY["beyond_scale"].format(world=hw.world, bench=bench, most=most)))
    return out


@cache
def accuracy() -> dict:
    """What bench/bench_planner_accuracy.py measured (data/accuracy.yaml; {} before it ran): the
    forward-chaining and shuffled errors report.py shows, and the `interval` constants."""
    from harness.planner.hardware import DATA, load_data

    return load_data("accuracy.yaml") if (DATA / "accuracy.yaml").exists() else {}


def constants() -> dict | None:
    """data/accuracy.yaml `interval` (None before bench/bench_planner_accuracy.py --write made it)."""
    return accuracy().get("interval")


def sigma(reasons: Iterable[str], k: dict) -> float:
    s = k["sigma"]
    return math.sqrt(s["seen"] ** 2 + sum(s.get(r, s["seen"]) ** 2 for r in reasons))


def range_min(predicted: float, reasons: Iterable[str], k: dict | None = None) -> list[float] | None:
    """[low, high] minutes holding the published time with 80 % probability (as measured forward
    in time); None when no interval constants exist."""
    k = k or constants()
    if not k:
        return None
    s = sigma(reasons, k)
    # e = ln(predicted / actual): actual = predicted x exp(-e), e in bias +- z sigma
    return [
        round(predicted * math.exp(-(k["bias"] + Z80 * s)), 3),
        round(predicted * math.exp(-(k["bias"] - Z80 * s)), 3),
    ]


def fit(residuals: list[tuple[float, list[str]]]) -> dict:
    """Interval constants from forward-chaining (log residual, reasons) pairs: the bias is the
    median residual; sigma_seen the robust spread (1.4826 x MAD) of the rows with no reason; each
    reason's sigma the extra spread its rows show beyond sigma_seen (0 if none), counted in
    `rows`. A reason without rows keeps sigma_seen (assumed, and listed in `assumed`)."""
    import statistics

    def spread(xs: list[float], centre: float) -> float:
        return 1.4826 * statistics.median(abs(x - centre) for x in xs) if xs else float("nan")

    all_e = [e for e, _ in residuals]
    bias = statistics.median(all_e)
    inside = [e for e, rs in residuals if not rs]
    s0 = spread(inside or all_e, bias)
    sig = {"seen": round(s0, 4)}
    rows = {"seen": len(inside)}
    assumed = [] if len(inside) >= 3 else ["seen (too few rows inside the data: the spread of all rows)"]
    for reason in REASONS:
        xs = [e for e, rs in residuals if reason in rs]
        rows[reason] = len(xs)
        if len(xs) < 3:
            sig[reason] = round(s0, 4)
            assumed.append(reason)
            continue
        # the extra spread of these rows beyond the in-data one (their own bias included)
        total = math.sqrt(statistics.mean((x - bias) ** 2 for x in xs))
        sig[reason] = round(math.sqrt(max(total**2 - s0**2, 0.0)), 4)
    return {"bias": round(bias, 4), "sigma": sig, "z": Z80, "rows": rows, "assumed": assumed}
