"""`check_path`: a log, a folder of logs or a submission tree -> one Report (see __init__)."""

from __future__ import annotations

import os
import time

from harness.core.errors import ConfigError
from harness.core.files import refuse_special
from harness.core.rulesets import default_ruleset, round_ruleset, rulesets, validate_ruleset
from harness.review.check.log import (
    LogResult,
    Report,
    check_log,
    display_path,
    has_mllog,
    log_files,
)
from harness.review.check.older import collapse
from harness.review.pool import pmap


def check_path(
    path: str | os.PathLike,
    ruleset: str | None = None,
    round_name: str | None = None,
    power_gaps: str = "warning",
) -> Report:
    """Check a log, a folder of logs, a result folder, a submitter folder or a submission tree.
    Without `ruleset` (or `round_name`, e.g. v5.0) each log's and folder's ruleset is inferred.
    A folder with `power/` also gets the power lint (gaps over 1 s at severity `power_gaps`)."""
    raw = os.fspath(path)
    if ruleset:
        validate_ruleset(ruleset)
    elif round_name and round_ruleset(round_name) is None:
        raise ConfigError(
            f"round '{round_name}' has no ruleset in mlperf-logging (known: {', '.join(rulesets())})"
        )
    if not os.path.lexists(raw):
        raise ConfigError(f"no such file or directory: {raw}")
    refuse_special(raw, "give a log file or a folder")
    t0 = time.perf_counter()
    if os.path.isdir(raw):
        from harness.review.check.tree import check_tree, find_orgs  # trees only: scoring skips it

        orgs = find_orgs(raw)
        if orgs:
            rep = check_tree(raw, orgs, ruleset, round_name, power_gaps)
        else:
            files = log_files(raw)
            # In a folder, text files without any MLLOG line (READMEs, job stdout) are not logs;
            # result_*.txt files always are. A single named file is always checked.
            logs = [f for f in files if os.path.basename(f).startswith("result_") or has_mllog(f)]
            if not logs:
                raise ConfigError(f"no MLPerf logs (*.txt, *.log with ':::MLLOG ' lines) under {raw}")
            rep = Report(path=raw, ruleset=ruleset, kind="logs")
            rep.skipped = [display_path(f, os.getcwd()) for f in files if f not in logs]
            jobs = [(f, ruleset, display_path(f, os.getcwd()), round_name) for f in logs]
            rep.logs = pmap(_check_one, jobs, min_items=8)
            from harness.review.check.power import lint as power_lint

            rep.findings += power_lint(os.path.abspath(raw), os.getcwd(), power_gaps)
    else:
        rep = Report(path=raw, ruleset=ruleset, kind="log")
        rep.logs = [check_log(raw, ruleset, round_name=round_name)]
    # one finding, first, for logs that look older than the ruleset nobody pinned (older.py)
    base = os.path.abspath(raw) if rep.kind == "tree" else os.getcwd()
    rep.head += collapse(rep.logs, base)
    if not rep.ruleset:
        used = sorted({r.ruleset for r in rep.logs if r.ruleset}) or [default_ruleset()]
        rep.ruleset = ", ".join(used)
    rep.seconds = time.perf_counter() - t0
    return rep


def _check_one(job: tuple) -> LogResult:
    path, ruleset, display, round_name = job
    return check_log(path, ruleset, display, round_name=round_name)
