"""Official scores of MLPerf Training results, for every ruleset and benchmark of mlperf-logging.

Score of one (submitter, system, benchmark) result folder, as the result summarizer
(mlperf-logging 4.1.68) computes it:
  1. which runs count: each result_*.txt that passes the compliance check of the folder's ruleset
     (its common.yaml, which chains the division and benchmark rules), parses cleanly and has
     run_start and run_stop. The run_stop status is not looked at (a closed run that missed the
     target fails the benchmark's rule instead);
  2. per counted run: (run_stop - run_start) / 60 / 1000 minutes (see parse.py for which lines);
  3. olympic mean: sort, drop the fastest and the slowest (4 each for unet3d); runs that do not
     count are the dropped slowest, at most as many as are dropped (more: no valid score);
  4. times the committed `scaling.json` factor, if the folder has one;
  5. energy (joules) the same way where the folder has power/ logs (energy.py).
A folder whose runs are another folder's (the same run_start/run_stop: one result published
twice, compare.duplicates) is scored too, and names the other in `duplicate_of`.
Same float operations in the same order as the summarizer, so scores are bit-identical.

`check=False` (`--no-check`) skips the compliance check for speed: then a run counts when it
parses cleanly, has run_start/run_stop and its run_stop status is success (the cheap stand-in for
the rules' target check). Compliance checks run in parallel over the cores (review/pool.py).

Where the official tool crashes (a line without metadata, a missing or unreadable system JSON, a
benchmark folder its ruleset does not list, broken power logs) or rewrites the tree (scaling.json),
we score anyway and say why in the row's `problems`; nothing here writes to the tree.
"""

from __future__ import annotations

import os

from harness.core.tree import find_result_dirs, result_files
from harness.review.pool import pmap
from harness.review.results.compare import duplicates, result_name
from harness.review.results.energy import has_power
from harness.review.results.folder import Plan, assemble, plan_folder, read_one
from harness.review.results.olympic import olympic_mean, score_runs

__all__ = ["olympic_mean", "score_runs", "score_result_dir", "score_tree"]


def score_tree(
    root: str | os.PathLike,
    *,
    with_runs: bool = True,
    check: bool = True,
    ruleset: str | None = None,
    round_name: str | None = None,
    rcp: bool = False,
    workers: int | None = None,
) -> list[dict]:
    """Score every result folder under a result folder, submitter, submission tree or round.

    `ruleset` / `round_name` fix the ruleset; otherwise each folder's is inferred (rules.resolve)
    and recorded in its row (`ruleset`, `ruleset_source`)."""
    plans = [plan_folder(d, ruleset, round_name) for d in find_result_dirs(root)]
    rows = _score(plans, with_runs=with_runs, check=check, rcp=rcp, workers=workers)
    for r in rows:
        r["duplicate_of"], r["duplicate_runs"] = None, 0
    for d in duplicates(rows):  # each is still scored: the folder is there; compare counts it once
        rows[d["dropped"]]["duplicate_of"] = result_name(rows[d["kept"]])
        rows[d["dropped"]]["duplicate_runs"] = d["shared"]
    return rows


def score_result_dir(path: str | os.PathLike, **kw) -> dict:
    """Score one `<org>/results/<system>/<benchmark>/` folder (same options as score_tree)."""
    opts = {k: kw.pop(k) for k in ("ruleset", "round_name") if k in kw}
    plan = plan_folder(os.path.abspath(os.fspath(path)), opts.get("ruleset"), opts.get("round_name"))
    return _score([plan], **kw)[0]


def _score(plans: list[Plan], *, with_runs=True, check=True, rcp=False, workers=None) -> list[dict]:
    tasks = [(f, p.ruleset, check and p.checkable) for p in plans for f in result_files(p.folder)]
    # the compliance check is what costs: spread it over the cores; reading alone is I/O-cheap
    runs = pmap(read_one, tasks, workers, min_items=8 if check else 2000)
    by_folder: dict[str, list] = {}
    for (f, _rs, _c), r in zip(tasks, runs):
        by_folder.setdefault(os.path.dirname(f), []).append(r)
    jobs = [(p, by_folder.get(p.folder, []), check, rcp, with_runs) for p in plans]
    # RCP checks and power logs cost per folder; without them a row is put together in microseconds
    heavy = rcp or any(has_power(p.folder) for p in plans)
    return pmap(assemble, jobs, workers, min_items=4 if heavy else 10_000)
