"""The only place that writes MLPerf log lines: a thin wrapper over `mlperf_logging.mllog`.

Every rank constructs an `MLLog`; only rank 0 writes (per-rank duplicates are log spam the rules
don't need). Each run gets its own `logging.Logger` with its own file handler, because
`mllog.config(filename=...)` appends a handler to a shared logger and would duplicate lines
across runs in one process.

Order written by `header()` / `init_stop()` (what the 4.0.0 checker wants, `submission_division`
before `init_stop`): cache_clear -> init_start -> submission_* -> seed -> hyperparameters,
train_samples, eval_samples -> init_stop -> run_start -> (block/eval)* -> run_stop{status}.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import Any

from mlperf_logging import mllog
from mlperf_logging.mllog import constants as C

from harness import __version__

_ids = itertools.count()
# mlperf-logging 4.1.68 exposes the class only as mllog.mllog.MLLogger (not mllog.MLLogger).
_MLLogger = getattr(mllog, "MLLogger", None) or mllog.mllog.MLLogger


class MLLog:
    def __init__(self, path: str | None, rank: int = 0, echo: bool = False):
        self.enabled = rank == 0 and path is not None
        self._logger = None
        if rank == 0 and path is not None:
            logger = logging.getLogger(f"mlperf_harness.mllog.{next(_ids)}")
            logger.propagate = False
            logger.setLevel(logging.INFO)
            handler = logging.FileHandler(path, mode="a")  # FileHandler flushes every record
            logger.addHandler(handler)
            if echo:
                logger.addHandler(logging.StreamHandler())
            self._logger = logger
            self._ml = _MLLogger(logger=logger, default_stack_offset=2)
        self.run_started = self.run_stopped = False
        self.run_start_ms: int | None = None
        self._resume: dict | None = None

    def resume(self, record: dict) -> None:
        """Continue the log of an interrupted run (`mlperf run --resume`): its prologue and
        run_start are already in the file, so everything this process logs before `run_start()`
        is dropped, and `run_start()` writes one `harness_resumed` event instead (value: the
        checkpoint step). run_start keeps the original time, so time-to-train includes the loss."""
        self._resume = dict(record)

    def _muted(self) -> bool:
        return self._resume is not None and not self.run_started

    # ---- raw events ---------------------------------------------------------------------
    def event(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: int | None = None):
        self._emit("event", key, value, metadata, time_ms)

    def start(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: int | None = None):
        self._emit("start", key, value, metadata, time_ms)

    def end(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: int | None = None):
        self._emit("end", key, value, metadata, time_ms)

    def _emit(self, kind, key, value, metadata, time_ms):
        # metadata.file/lineno must name the training code, not this wrapper. Every public method
        # calls _emit directly, so the training code is always 3 frames above mllog's helper
        # (caller -> our method -> _emit -> MLLogger.<kind>).
        if self.enabled and not self._muted():
            getattr(self._ml, kind)(key=key, value=value, metadata=metadata, time_ms=time_ms, stack_offset=3)

    # ---- the fixed prologue -------------------------------------------------------------
    def header(self, plan, hyperparameters: dict[str, Any]):
        """cache_clear .. hyperparameters, in the order the checker needs. Call first thing."""
        from harness.core.rule_files import log_keys

        s = plan.submission
        known = log_keys(plan.ruleset, plan.submission_benchmark, s.division)
        rows = [
            ("event", C.CACHE_CLEAR, plan.cache_cleared, None),
            ("start", C.INIT_START, None, None),
            ("event", C.SUBMISSION_BENCHMARK, plan.submission_benchmark, None),
            ("event", C.SUBMISSION_ORG, s.org, None),
            ("event", C.SUBMISSION_DIVISION, s.division, None),
            # submission_status left the logs in ruleset 4.1.0 (the system JSON's `status` stays)
            *([("event", C.SUBMISSION_STATUS, s.status, None)] if C.SUBMISSION_STATUS in known else []),
            ("event", C.SUBMISSION_PLATFORM, s.platform, None),
            # Not official keys (extra keys are allowed): tell `mlperf check` which rules apply.
            ("event", "harness_size", plan.size, {"not_submittable": plan.size == "tiny"}),
            ("event", "harness_ruleset", plan.ruleset, None),
            ("event", "harness_version", __version__, None),
            ("event", C.SEED, plan.seed, None),
            # precision, parallelism and config disclosure (mandatory from 6.1.0, allowed before)
            *(("event", k, v, None) for k, v in plan.disclosure.items()),
            *(("event", k, v, None) for k, v in hyperparameters.items() if k not in plan.disclosure),
        ]
        for kind, key, value, md in rows:
            self._emit(kind, key, value, md, None)

    def init_stop(self):
        self._emit("end", C.INIT_STOP, None, None, None)

    def run_start(self):
        if self._resume is not None:
            r = self._resume
            now = now_ms()
            lost = now - r["interrupted_ms"] if r.get("interrupted_ms") else None
            self.run_started = True
            self._emit(
                "event",
                "harness_resumed",
                r.get("checkpoint_step"),
                {
                    "checkpoint": r.get("checkpoint"),
                    "interrupted_ms": r.get("interrupted_ms"),
                    "lost_ms": lost,
                    "discarded_keys": r.get("discarded_keys", []),
                    "discarded_file": r.get("discarded_file"),
                },
                None,
            )
            return
        self.run_start_ms = now_ms()
        self._emit("start", C.RUN_START, None, None, self.run_start_ms)
        self.run_started = True

    def run_stop(self, success: bool, metadata: dict | None = None, time_ms: int | None = None):
        if self.run_stopped:
            return
        md = {C.STATUS: C.SUCCESS if success else C.ABORTED}
        md.update(metadata or {})
        self._emit("end", C.RUN_STOP, None, md, time_ms)
        self.run_stopped = True

    def close(self):
        if self._logger is not None:
            for h in list(self._logger.handlers):
                h.close()
                self._logger.removeHandler(h)


def now_ms() -> int:
    return int(time.time() * 1e3)
