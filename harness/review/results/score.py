"""Official-grade scoring of MLPerf Training results, without the official summarizer's faults.

Score of one (submitter, system, benchmark) result folder, as the v4.0 rules and
mlperf-logging 4.1.68's result summarizer compute it:
  1. per run: (run_stop - run_start) / 60 / 1000 minutes (see parse.py for which lines);
  2. olympic mean: sort, drop the fastest and the slowest, average the rest — with one run that
     did not converge allowed, counted as the dropped slowest (more than one: no valid score);
  3. times the committed `scaling.json` factor, if the folder has one.
Same float operations in the same order as `result_summarizer._compute_olympic_average`, so
scores are bit-identical on published logs.

Deliberate differences from the summarizer (faults listed in shared/notes/mlperf-rules.md):
- the committed `scaling.json` is applied and never rewritten (the summarizer re-derives and
  rewrites it after reading it, so it is not idempotent);
- a run whose `run_stop` status is not `success` counts as not converged, as the rules and the
  RCP checker count it (the summarizer ignores the status and scores its time);
- the compliance checker is not run here (that is `mlperf check`); the summarizer silently drops
  non-compliant files;
- odd files (empty, binary, missing metadata, unreadable, missing systems JSON, power logs) are
  reported as problems instead of crashing.
"""

from __future__ import annotations

import glob
import json
import math
import os
from collections.abc import Iterable

from harness.core.tree import find_result_dirs, load_system, read_scaling, result_files
from harness.review.check.log import check_log
from harness.review.results.parse import Run, read_run, time_to_train_min

__all__ = [
    "olympic_mean",
    "read_run",
    "time_to_train_min",
    "score_runs",
    "score_result_dir",
    "score_tree",
    "RUNS_PER_RESULT",
]

# mlperf_logging.benchmark_meta (training): exact number of result files per benchmark
# (the v4.0 four here; other rounds' benchmarks are looked up there).
RUNS_PER_RESULT = {"gpt3": 3, "llama2_70b_lora": 10, "gnn": 10, "stable_diffusion": 10}
MAX_DROPPED = 1  # runs dropped at each end of the olympic mean...
MAX_DROPPED_BY_BENCHMARK = {"unet3d": 4}  # ...except unet3d (40 runs), as in the summarizer


def runs_per_result(benchmark: str | None) -> int | None:
    if benchmark in RUNS_PER_RESULT:
        return RUNS_PER_RESULT[benchmark]
    try:
        from mlperf_logging.benchmark_meta import get_result_file_counts

        return get_result_file_counts("training").get(benchmark or "")
    except Exception:  # noqa: BLE001 - a missing/odd mlperf-logging only loses the count check
        return None


def olympic_mean(values: Iterable[float | None], max_dropped: int = MAX_DROPPED) -> float:
    """Olympic mean of per-run minutes: drop the fastest and the slowest, average the rest.

    A value that is None, NaN or infinite is a run that did not converge; one such run is
    allowed and is the dropped slowest. Raises ValueError when more than one run did not
    converge or fewer than 3 runs are given (nothing would be left to average).
    `max_dropped` is the number dropped at each end (4 for unet3d in older rounds).
    """
    values = list(values)
    scores = [v for v in values if v is not None and math.isfinite(v)]
    dropped = len(values) - len(scores)
    if dropped > max_dropped:
        raise ValueError(f"{dropped} of {len(values)} runs did not converge; at most {max_dropped} may")
    # result_summarizer._compute_olympic_average, verbatim arithmetic
    scores.sort()
    countable = scores[max_dropped : len(scores) - (max_dropped - dropped)]
    if not countable:
        raise ValueError(f"{len(values)} runs are too few for an olympic mean (need at least 3)")
    return sum(countable) * 1.0 / len(countable)


def score_runs(runs: list[Run], benchmark: str | None = None, scaling_factor: float = 1.0) -> dict:
    """Score already-read runs. Returns minutes per run, olympic mean, factor, score, problems."""
    problems = []
    minutes = []
    for r in runs:
        name = os.path.basename(r.path)
        if not r.readable:
            why = "; ".join(r.problems + [f"line {n}: {m}" for n, m in r.parse_errors[:3]])
            problems.append(f"{name}: not scored ({why})")
            minutes.append(None)
        elif r.status != "success":
            problems.append(
                f"{name}: run_stop status is {r.status!r}, so the run did not converge; it counts as the "
                f"dropped slowest (the official summarizer would count its {r.minutes:.3f} min)"
            )
            minutes.append(None)
        else:
            minutes.append(r.minutes)
    expected = runs_per_result(benchmark)
    if expected and len(runs) != expected:
        problems.append(f"{len(runs)} result files, {benchmark} needs exactly {expected}")
    try:
        mean = olympic_mean(minutes, MAX_DROPPED_BY_BENCHMARK.get(benchmark or "", MAX_DROPPED))
    except ValueError as e:
        mean = None
        problems.append(f"no valid score: {e}")
    score = None if mean is None else mean * scaling_factor
    return {
        "run_minutes": minutes,
        "olympic_mean_min": mean,
        "scaling_factor": scaling_factor,
        "score_min": score,
        "problems": problems,
    }


def _int(v) -> int | None:
    try:
        return int(str(v).strip())
    except (TypeError, ValueError):
        return None


def score_result_dir(
    path: str | os.PathLike, *, with_runs: bool = True, compliance: str | None = None
) -> dict:
    """Score one `<org>/results/<system>/<benchmark>/` folder. Never raises for its contents."""
    folder = os.path.abspath(os.fspath(path))
    benchmark = {"mask": "maskrcnn"}.get(
        os.path.basename(folder), os.path.basename(folder)
    )  # summarizer alias
    system = os.path.basename(os.path.dirname(folder))
    results = os.path.dirname(os.path.dirname(folder))
    org_dir = os.path.dirname(results) if os.path.basename(results) == "results" else None
    runs = [read_run(f) for f in result_files(folder)]
    if compliance:
        # as the summarizer does: a log failing the compliance checker is dropped (tiny logs get
        # the tiny rules)
        for r in runs:
            if r.readable and not check_log(r.path, compliance).passed:
                r.problems.append(f"fails the {compliance} compliance check (see `mlperf check`): dropped")
    logged = [r.benchmark for r in runs if r.benchmark]
    if logged and runs_per_result(benchmark) is None:
        # a folder named otherwise (e.g. loose logs): go by what the logs say
        benchmark = max(set(logged), key=logged.count)
    desc, sys_problem = load_system(org_dir, system)
    factor, scale_problem = read_scaling(folder)
    row = {
        "submitter": os.path.basename(org_dir) if org_dir else None,
        "system": system,
        "benchmark": benchmark,
        "division": None,
        "availability": None,
        "system_name": None,
        "accelerator": None,
        "accelerators": None,
        "nodes": None,
        "tiny": any(r.tiny for r in runs),
        "runs": len(runs),
        "path": folder,
    }
    problems = []
    if desc is not None:
        nodes, per_node = _int(desc.get("number_of_nodes")), _int(desc.get("accelerators_per_node"))
        row.update(
            division=desc.get("division"),
            availability=desc.get("status"),
            system_name=desc.get("system_name"),
            accelerator=desc.get("accelerator_model_name"),
            nodes=nodes,
            accelerators=nodes * per_node if nodes is not None and per_node is not None else None,
        )
    else:
        problems.append(sys_problem)
        divisions = {r.division for r in runs if r.division}
        row["division"] = divisions.pop() if len(divisions) == 1 else None
        plat = next(
            (r.keys.get("submission_platform") for r in runs if r.keys.get("submission_platform")), None
        )
        row["system_name"] = plat
    if scale_problem:
        problems.append(scale_problem)
    if not runs:
        problems.append("no result_*.txt files")
    scored = score_runs(runs, benchmark, factor)
    row.update({k: v for k, v in scored.items() if k != "problems"})
    row["problems"] = problems + scored["problems"]
    if os.path.isdir(os.path.join(folder, "power")):
        row["problems"].append("power/ logs present: not scored (performance only)")
    if with_runs:
        row["run_details"] = [r.to_dict() for r in runs]
    return row


def score_tree(
    root: str | os.PathLike, *, with_runs: bool = True, compliance: str | None = None
) -> list[dict]:
    """Score every result folder under a result folder, submitter, submission tree or round."""
    return [score_result_dir(d, with_runs=with_runs, compliance=compliance) for d in find_result_dirs(root)]
