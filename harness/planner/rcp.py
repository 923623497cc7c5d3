"""Samples to converge at a global batch, from the official RCP tables that mlperf-logging ships.

Same arithmetic as `mlperf_logging.rcp_checker` (olympic mean of the reference runs, pruning of
points that converge slower than the interpolation of their neighbours, linear interpolation on
the pruned set), re-done in plain Python because importing the checker pulls in scipy (~0.7 s) and
`mlperf plan --json` must answer in well under a second. The tables are mlperf-logging's data,
found under the benchmark's official name (`Benchmark.official`) in each ruleset. tests/unit/test_planner_model.py checks the
numbers against the checker itself.

Predicting at the RCP mean is what the score sees: a submission that converges faster than the
mean is scaled up to it (`scaling.json`), one that converges slower keeps its own (slower) time.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from harness.core.errors import ConfigError
from harness.planner.params import cost

if TYPE_CHECKING:
    from benchmarks.benchmark import Benchmark


@dataclass(frozen=True)
class RcpPoint:
    bs: int
    mean: float
    """Olympic mean of the reference runs, in the benchmark's RCP unit."""
    hyperparams: dict


@cache
def points(bench: Benchmark, ruleset: str = "4.0.0") -> tuple[RcpPoint, ...]:
    """All RCP records of a benchmark, sorted by batch size (under its name in the ruleset, which
    may differ from round to round)."""
    from harness.core.rulesets import names_by_ruleset, rcp_records

    name = names_by_ruleset(bench.official).get(ruleset, bench.official)
    records = rcp_records(ruleset, name)
    if not records:
        raise ConfigError(
            f"no RCP table for '{bench.name}' in ruleset {ruleset} (rcp_checker/training_{ruleset}/rcps_{name}.json)"
        )
    out = []
    for rec in records.values():
        runs = sorted(rec.get("Epochs to converge") or rec.get("samples to converge"))
        kept = runs[1:-1]
        out.append(RcpPoint(int(rec["BS"]), sum(kept) / len(kept), dict(rec.get("Hyperparams", {}))))
    return tuple(sorted(out, key=lambda p: p.bs))


def _interp(bs: float, lo: RcpPoint, hi: RcpPoint) -> float:
    return lo.mean + (hi.mean - lo.mean) * (bs - lo.bs) / (hi.bs - lo.bs)


@cache
def pruned(bench: Benchmark, ruleset: str = "4.0.0") -> tuple[RcpPoint, ...]:
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


def bs_range(bench: Benchmark, ruleset: str = "4.0.0") -> tuple[int, int]:
    """(smallest reference batch, largest pruned RCP batch). The checker accepts any batch up to
    the largest (below the pruned set it compares against the smallest pruned RCP); above it
    answers `Missing RCP`."""
    return points(bench, ruleset)[0].bs, pruned(bench, ruleset)[-1].bs


def check_bs(bench: Benchmark, gbs: int, ruleset: str = "4.0.0") -> None:
    lo, hi = bs_range(bench, ruleset)
    if gbs > hi:
        raise ConfigError(
            f"global batch size {gbs} is above the largest {bench.name} RCP ({hi}): the RCP checker "
            f"would answer 'Missing RCP'; choose GBS <= {hi}"
        )


def _at(pts: tuple[RcpPoint, ...], gbs: int) -> float:
    """The mean at `gbs` on a sorted set: exact, interpolated, or the nearest end."""
    if gbs <= pts[0].bs:
        return pts[0].mean
    for lo, hi in zip(pts, pts[1:]):
        if lo.bs <= gbs <= hi.bs:
            return lo.mean if gbs == lo.bs else _interp(gbs, lo, hi)
    return pts[-1].mean


@cache
def checker_mean(bench: Benchmark, gbs: int, ruleset: str = "4.0.0") -> float:
    """The RCP mean mlperf_logging's rcp_checker (pruned pass) compares a submission at `gbs`
    with: the RCP at that batch, the interpolation between its pruned neighbours, or, below the
    smallest pruned RCP, that smallest one (accepted when the submission converges no faster)."""
    check_bs(bench, gbs, ruleset)
    return _at(pruned(bench, ruleset), gbs)


@cache
def reference_mean(bench: Benchmark, gbs: int, ruleset: str = "4.0.0") -> float:
    """What the reference runs say a run at `gbs` needs: the RCP at that batch, else the
    interpolation over all RCPs (pruned ones included), else the nearest end."""
    return _at(points(bench, ruleset), gbs)


def converge(bench: Benchmark, gbs: int, ruleset: str = "4.0.0") -> float:
    """RCP units the score sees at `gbs`: a run converging faster than the checker's RCP mean is
    scaled up to it (scaling.json), a slower one keeps its own, so the larger of the checker's
    mean and the reference runs' own figure at this batch (they differ below the smallest pruned
    RCP, or where an older ruleset's RCPs count steps)."""
    return max(checker_mean(bench, gbs, ruleset), reference_mean(bench, gbs, ruleset))


def samples_to_converge(bench: Benchmark, gbs: int, ruleset: str = "4.0.0") -> float:
    """RCP units at `gbs` x the benchmark's samples per RCP unit (its cost model's)."""
    return converge(bench, gbs, ruleset) * cost(bench).samples_per_rcp_unit(gbs, ruleset)
