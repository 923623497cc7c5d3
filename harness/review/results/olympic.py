"""Which runs of a result folder count, and their olympic mean (the arithmetic of the official
result summarizer, `_compute_olympic_average`); see score.py for the whole rule."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable

from harness.core import rulesets as rules


def olympic_mean(values: Iterable[float | None], max_dropped: int = 1) -> float:
    """Olympic mean of per-run minutes: drop the fastest and the slowest, average the rest.

    A value that is None, NaN or infinite is a run that did not count; up to `max_dropped` such
    runs are allowed and are the dropped slowest. Raises ValueError when more did not count or
    too few runs are given (nothing would be left to average). `max_dropped` is the number
    dropped at each end (rules.max_dropped: 4 for unet3d).
    """
    values = list(values)
    scores = [v for v in values if v is not None and math.isfinite(v)]
    dropped = len(values) - len(scores)
    if dropped > max_dropped:
        raise ValueError(f"{dropped} of {len(values)} runs do not count; at most {max_dropped} may")
    # result_summarizer._compute_olympic_average, the same arithmetic
    scores.sort()
    countable = scores[max_dropped : len(scores) - (max_dropped - dropped)]
    if not countable:
        raise ValueError(f"{len(values)} runs are too few for an olympic mean")
    return sum(countable) * 1.0 / len(countable)


def score_runs(
    runs: list, benchmark: str | None = None, scaling_factor: float = 1.0, checked: bool = True
) -> dict:
    """Score already-read runs. Returns minutes per run (None: not counted), olympic mean,
    factor, score and problems."""
    problems, minutes = [], []
    for r in runs:
        name = os.path.basename(r.path)
        if not r.readable:
            # a checked run's problem already names its first bad line; else list a few
            bad = [] if r.problems else [f"line {n}: {m}" if n else m for n, m in r.parse_errors[:3]]
            why = "; ".join(r.problems + bad)
            problems.append(f"{name}: not counted ({why})")
            minutes.append(None)
        elif r.status != "success" and not checked:
            problems.append(
                f"{name}: run_stop status is {r.status!r}: not counted (without the compliance check the "
                f"status stands in for the target check; checked, a compliant log counts its {r.minutes:.3f} min)"
            )
            minutes.append(None)
        else:
            if r.status != "success":
                problems.append(
                    f"{name}: run_stop status is {r.status!r} but the log passes the compliance check: counted, "
                    "as the official summarizer counts it"
                )
            minutes.append(r.minutes)
    required = rules.runs_required(benchmark)
    if required and len(runs) != required:
        problems.append(
            f"{len(runs)} result files; {benchmark} needs exactly {required} (the package checker rejects "
            "the folder; the summarizer scores what is there, and so do we)"
        )
    try:
        mean = olympic_mean(minutes, rules.max_dropped(benchmark))
    except ValueError as e:
        mean = None
        problems.append(f"no valid score: {e}")
    return {
        "run_minutes": minutes,
        "olympic_mean_min": mean,
        "scaling_factor": scaling_factor,
        "score_min": None if mean is None else mean * scaling_factor,
        "problems": problems,
    }
