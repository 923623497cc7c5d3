"""Live progress of runs, read from their MLPerf logs (the training ranks never draw bars); the
run layer calls it through its `Reporter` protocol (harness/run/execute.py).

On a terminal: one rich status line per run (eval count, latest quality vs target, elapsed).
Elsewhere (CI, pipes, --json): one plain line per evaluation on stderr.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from rich.console import Console

from harness.core.mllog_reader import read_new_events


class Progress:
    def __init__(self, total_runs: int, quiet: bool = False):
        self.console = Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")))
        self.live = self.console.is_terminal and not os.environ.get("CI") and not quiet
        self.quiet = quiet
        self.total = total_runs
        self._offsets: dict[str, int] = {}
        self._evals: dict[str, int] = {}
        self._start = time.monotonic()
        self._status = None

    def say(self, text: str) -> None:
        if self.live:
            if self._status is None:
                self._status = self.console.status(text)
                self._status.start()
            else:
                self._status.update(text)
        elif not self.quiet:
            print(text, file=sys.stderr, flush=True)

    def poll(self, plan) -> None:
        key = plan.run_dir
        events, self._offsets[key] = read_new_events(Path(plan.log_path), self._offsets.get(key, 0))
        for ev in events:
            if ev.get("key") == "eval_accuracy":
                self._evals[key] = self._evals.get(key, 0) + 1
                md = ev.get("metadata", {})
                metric = md.get("metric", next(iter(plan.target)))
                target = plan.target.get(metric, next(iter(plan.target.values())))
                prog = md.get("samples_count", md.get("epoch_num"))
                self.say(
                    f"run {plan.run_index + 1}/{self.total} {plan.benchmark}: eval {self._evals[key]} "
                    f"{metric} {ev.get('value'):.4g} (target {target:g}) at {prog} "
                    f"[{time.monotonic() - self._start:.0f}s]"
                )
            elif ev.get("key") == "run_start":
                self.say(
                    f"run {plan.run_index + 1}/{self.total} {plan.benchmark}: training (seed {plan.seed})"
                )

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
