"""A fast, crash-proof reader of the few MLLOG keys that scoring needs.

Lines are read by harness/core/mllog_reader.py exactly as mlperf-logging 4.1.68 reads them
(latin-1, the last `:::MLLOG ` on a line, JSON with time_ms/key/value/metadata), so scores match
the official result summarizer. Where the official parser raises (a missing `metadata` is an
uncaught `KeyError` there), this reader records a problem instead. It never raises for file contents; unreadable files (missing,
directories, symlink loops, permissions) become a problem too.

Time-to-train is taken exactly as `result_summarizer._query_run_start_stop` does: walk the lines in
file order and stop as soon as both `run_start` and `run_stop` have been seen (for a compliant log,
which has exactly one of each, that is the first `run_start` and the first `run_stop`). Evaluations
logged after `run_stop` (Stable Diffusion's offline FID/CLIP) therefore do not matter.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass, field

from harness.core.mllog_reader import iter_mllog, parse_record

# Keys whose values a Run keeps (the first occurrence of each unless noted).
_FIRST = (
    "submission_benchmark",
    "submission_org",
    "submission_division",
    "submission_status",
    "submission_platform",
    "global_batch_size",
    "harness_size",
    "seed",
)


@dataclass
class Run:
    """What one result log says about one run."""

    path: str
    mllog_lines: int = 0
    keys: dict = field(default_factory=dict)  # first value of each key in _FIRST
    run_start_ms: float | None = None
    run_stop_ms: float | None = None
    status: str | None = None  # run_stop metadata.status
    eval_points: int = 0
    last_eval: dict | None = None  # value + metadata of the last eval_accuracy before run_stop
    parse_errors: list = field(default_factory=list)  # (file line number 1-based, message)
    problems: list = field(default_factory=list)  # plain-English, one line each

    @property
    def benchmark(self) -> str | None:
        return self.keys.get("submission_benchmark")

    @property
    def division(self) -> str | None:
        return self.keys.get("submission_division")

    @property
    def seed(self):
        return self.keys.get("seed")

    @property
    def global_batch_size(self):
        return self.keys.get("global_batch_size")

    @property
    def org(self) -> str | None:
        return self.keys.get("submission_org")

    @property
    def platform(self) -> str | None:
        return self.keys.get("submission_platform")

    @property
    def tiny(self) -> bool:
        return self.keys.get("harness_size") == "tiny"

    @property
    def minutes(self) -> float | None:
        """(run_stop - run_start) in minutes, computed as the summarizer does (ms / 60 / 1000)."""
        if self.run_start_ms is None or self.run_stop_ms is None:
            return None
        return (self.run_stop_ms - self.run_start_ms) / 60 / 1000

    @property
    def readable(self) -> bool:
        """The summarizer would score this file: no parse errors and both run_start/run_stop."""
        return not self.parse_errors and self.minutes is not None and not self.problems

    @property
    def converged(self) -> bool:
        """Counted as a converged run by the rules (RCP checker): run_stop status == success."""
        return self.readable and self.status == "success"

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "benchmark": self.benchmark,
            "division": self.division,
            "tiny": self.tiny,
            "status": self.status,
            "minutes": self.minutes,
            "run_start_ms": self.run_start_ms,
            "run_stop_ms": self.run_stop_ms,
            "global_batch_size": self.keys.get("global_batch_size"),
            "seed": self.keys.get("seed"),
            "eval_points": self.eval_points,
            "converged": self.converged,
            "problems": self.problems
            + [f"line {n}: {msg}" for n, msg in self.parse_errors[:5]]
            + (
                [f"... {len(self.parse_errors) - 5} more unreadable MLLOG lines"]
                if len(self.parse_errors) > 5
                else []
            ),
        }


def read_run(path: str | os.PathLike) -> Run:
    """Read one result log. Never raises: problems are recorded on the Run."""
    path = os.fspath(path)
    run = Run(path=path)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or device could block forever
            run.problems.append("not a regular file (a FIFO, socket or device)")
            return run
    except OSError:
        pass  # reported by open() below with its reason
    done = False  # both run_start and run_stop seen: time-to-train is fixed
    try:
        for n, _idx, text in iter_mllog(path):
            run.mllog_lines += 1
            # Cheap filter: only decode lines that can matter (plus every line's validity, which
            # the summarizer requires: one bad line drops the file).
            m, err = parse_record(text)
            if err:
                run.parse_errors.append((n, err))
                continue
            key = m["key"]
            md = m["metadata"]
            if key in _FIRST and key not in run.keys:
                run.keys[key] = m["value"]
            if not done:
                if key == "run_start":
                    run.run_start_ms = m["time_ms"]
                elif key == "run_stop":
                    run.run_stop_ms = m["time_ms"]
                    run.status = md.get("status") if isinstance(md, dict) else None
                elif key == "eval_accuracy":
                    run.eval_points += 1
                    run.last_eval = {"value": m["value"], **(md if isinstance(md, dict) else {})}
                done = run.run_start_ms is not None and run.run_stop_ms is not None
    except OSError as e:
        run.problems.append(f"cannot read the file: {e.strerror or e}")
        return run
    if run.mllog_lines == 0:
        run.problems.append("no ':::MLLOG ' lines (empty, truncated or not an MLPerf log)")
    elif run.run_start_ms is None:
        run.problems.append("no run_start: the run never started timing")
    elif run.run_stop_ms is None:
        run.problems.append(
            "no run_stop: the run was cut off (the harness appends 'run_stop status=aborted')"
        )
    if run.minutes is not None and (math.isnan(run.minutes) or run.minutes < 0):
        run.problems.append(f"run_stop is before run_start ({run.minutes:.3f} min)")
    return run


def time_to_train_min(path: str | os.PathLike) -> float | None:
    """Minutes from run_start to run_stop of one log, or None if the log does not say."""
    return read_run(path).minutes
