"""Samples to converge at a global batch, from the official RCP tables that mlperf-logging ships.

Same arithmetic as `mlperf_logging.rcp_checker` (olympic mean of the reference runs, pruning of
points that converge slower than the interpolation of their neighbours, linear interpolation on
the pruned set), re-done in plain Python because importing the checker pulls in scipy (~0.7 s) and
`mlperf plan --json` must answer in well under a second. tests/unit/test_planner_model.py checks the
numbers against the checker itself.

Predicting at the RCP mean is what the score sees: a submission that converges faster than the
mean is scaled up to it (`scaling.json`), one that converges slower keeps its own (slower) time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from harness.core.errors import ConfigError


@dataclass(frozen=True)
class RcpPoint:
    bs: int
    mean: float
    """Olympic mean of the reference runs, in the benchmark's RCP unit."""
    hyperparams: dict


def _rcp_dir(ruleset: str) -> Path:
    import mlperf_logging  # light: the package __init__ imports nothing heavy

    return Path(mlperf_logging.__file__).resolve().parent / "rcp_checker" / f"training_{ruleset}"


@cache
def points(bench: str, ruleset: str = "4.0.0") -> tuple[RcpPoint, ...]:
    """All RCP records of a benchmark, sorted by batch size."""
    path = _rcp_dir(ruleset) / f"rcps_{bench}.json"
    if not path.exists():
        raise ConfigError(f"no RCP table for '{bench}' in ruleset {ruleset} ({path})")
    out = []
    for rec in json.loads(path.read_text()).values():
        runs = sorted(rec.get("Epochs to converge") or rec.get("samples to converge"))
        kept = runs[1:-1]
        out.append(RcpPoint(int(rec["BS"]), sum(kept) / len(kept), dict(rec.get("Hyperparams", {}))))
    return tuple(sorted(out, key=lambda p: p.bs))


def _interp(bs: float, lo: RcpPoint, hi: RcpPoint) -> float:
    return lo.mean + (hi.mean - lo.mean) * (bs - lo.bs) / (hi.bs - lo.bs)


@cache
def pruned(bench: str, ruleset: str = "4.0.0") -> tuple[RcpPoint, ...]:
    """The checker's pruned set: drop batch sizes below the fastest-converging one, then any point
    that converges slower than the line between its neighbours."""
    pts = list(points(bench, ruleset))
    fastest = min(pts, key=lambda p: p.mean)
    pts = [p for p in pts if p.bs >= fastest.bs]
    i = 1
    while i < len(pts) - 1:
        if pts[i].mean > _interp(pts[i].bs, pts[i - 1], pts[i + 1]):
            del pts[i]
            i -= 1
        i += 1
    return tuple(pts)


def bs_range(bench: str, ruleset: str = "4.0.0") -> tuple[int, int]:
    """Global batch sizes the RCPs cover: from the smallest reference batch (the rules: other sizes
    need new RCPs; gpt3 1536) to the largest (above it the checker answers `Missing RCP`)."""
    return points(bench, ruleset)[0].bs, pruned(bench, ruleset)[-1].bs


def check_bs(bench: str, gbs: int, ruleset: str = "4.0.0") -> None:
    lo, hi = bs_range(bench, ruleset)
    if gbs > hi:
        raise ConfigError(
            f"global batch size {gbs} is above the largest {bench} RCP ({hi}): the RCP checker "
            f"would answer 'Missing RCP'; choose {lo} <= GBS <= {hi}"
        )
    if gbs < lo:
        raise ConfigError(
            f"global batch size {gbs} is below the smallest {bench} RCP ({lo}): a closed "
            f"submission would need new reference convergence points; choose {lo} <= GBS <= {hi}"
        )


def converge(bench: str, gbs: int, ruleset: str = "4.0.0") -> float:
    """RCP mean (the benchmark's unit) at `gbs`: exact, interpolated, or the smallest point's."""
    pts = pruned(bench, ruleset)
    check_bs(bench, gbs, ruleset)
    if gbs <= pts[0].bs:  # the checker compares batches below the pruned set with its smallest point
        return pts[0].mean
    for lo, hi in zip(pts, pts[1:]):
        if lo.bs <= gbs <= hi.bs:
            return lo.mean if gbs == lo.bs else _interp(gbs, lo, hi)
    return pts[-1].mean
