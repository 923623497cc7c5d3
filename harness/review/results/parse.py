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

A Run is built from our own fast reader (`read_run`, for `--no-check`) or from the LogLines the
official parser makes for the compliance check (`run_from_loglines`), through one `Run.feed`.
Besides the time it keeps what throughput needs: the progress (samples_count, else epoch_num) of
the last evaluation before run_stop and the `tracked_stats` throughputs the log reports.
"""

from __future__ import annotations

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
    last_eval_ms: float | None = None
    tracked_throughput: list = field(default_factory=list)  # tracked_stats value.throughput
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

    def feed(self, key: str, time_ms, value, md) -> None:
        """Take one record, in file order."""
        if key in _FIRST and key not in self.keys:
            self.keys[key] = value
        if self.run_start_ms is not None and self.run_stop_ms is not None:
            return  # time-to-train is fixed: later lines do not matter
        if key == "run_start":
            self.run_start_ms = time_ms
        elif key == "run_stop":
            self.run_stop_ms = time_ms
            self.status = md.get("status") if isinstance(md, dict) else None
        elif key == "eval_accuracy":
            self.eval_points += 1
            self.last_eval = {"value": value, **(md if isinstance(md, dict) else {})}
            self.last_eval_ms = time_ms
        elif key == "tracked_stats" and isinstance(value, dict):
            t = value.get("throughput")
            if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t):
                self.tracked_throughput.append(float(t))

    def finish(self) -> Run:
        """Record what keeps the file from being scored; returns self."""
        if self.mllog_lines == 0:
            self.problems.append("no ':::MLLOG ' lines (empty, truncated or not an MLPerf log)")
        elif self.run_start_ms is None:
            self.problems.append("no run_start: the run never started timing")
        elif self.run_stop_ms is None:
            self.problems.append(
                "no run_stop: the run was cut off (the harness appends 'run_stop status=aborted')"
            )
        if self.minutes is not None and (math.isnan(self.minutes) or self.minutes < 0):
            self.problems.append(f"run_stop is before run_start ({self.minutes:.3f} min)")
        return self

    @property
    def progress(self) -> tuple[float, str] | None:
        """(progress, unit) at the last evaluation before run_stop: samples_count, else epoch_num."""
        for unit in ("samples_count", "epoch_num"):
            v = (self.last_eval or {}).get(unit)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                return float(v), unit
        return None

    @property
    def progress_per_s(self) -> float | None:
        """Training progress per second from run_start to the last evaluation (evaluations
        included): the end-to-end throughput, in the unit of `progress`."""
        p = self.progress
        if p is None or self.run_start_ms is None or self.last_eval_ms is None:
            return None
        dt = (self.last_eval_ms - self.run_start_ms) / 1000
        return p[0] / dt if dt > 0 else None

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
            "progress": (self.progress or (None, None))[0],
            "progress_unit": (self.progress or (None, None))[1],
            "progress_per_s": self.progress_per_s,
            "tracked_throughput": median(self.tracked_throughput) if self.tracked_throughput else None,
            "converged": self.converged,
            "problems": self.problems
            + [f"line {n}: {msg}" if n else msg for n, msg in self.parse_errors[:5]]
            + (
                [f"... {len(self.parse_errors) - 5} more unreadable MLLOG lines"]
                if len(self.parse_errors) > 5
                else []
            ),
        }


def median(values: list) -> float:
    """statistics.median without importing statistics (fractions, decimal: ~50 ms at start-up)."""
    v = sorted(values)
    m = len(v) // 2
    return v[m] if len(v) % 2 else (v[m - 1] + v[m]) / 2


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
    try:
        for n, _idx, text in iter_mllog(path):
            run.mllog_lines += 1
            m, err = parse_record(text)
            if err:  # the summarizer requires every line valid: one bad line drops the file
                run.parse_errors.append((n, err))
                continue
            run.feed(m["key"], m["time_ms"], m["value"], m["metadata"])
    except OSError as e:
        run.problems.append(f"cannot read the file: {e.strerror or e}")
        return run
    return run.finish()


def run_from_loglines(path: str, loglines: list, failed: list) -> Run:
    """A Run from the official parser's LogLines (timestamp, key, value={value, metadata})."""
    run = Run(path=os.fspath(path), mllog_lines=len(loglines) + len(failed))
    run.parse_errors = [(None, err) for _line, err in failed]
    for ll in loglines:
        v = ll.value if isinstance(ll.value, dict) else {}
        run.feed(ll.key, ll.timestamp, v.get("value"), v.get("metadata"))
    return run.finish()


def time_to_train_min(path: str | os.PathLike) -> float | None:
    """Minutes from run_start to run_stop of one log, or None if the log does not say."""
    return read_run(path).minutes
