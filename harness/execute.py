"""Run resolved plans: prepare data on demand, launch, finalize each log, claim result files."""

from __future__ import annotations

import signal
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from harness import launch, resume
from harness.errors import ConfigError, HarnessError
from harness.mllog import MLLog
from harness.progress import Progress, read_events
from harness.results import writer
from harness.runner import Resolved, entry_module, is_prepared, write_plans


@dataclass
class RunResult:
    run: int
    seed: int
    status: str
    """success | aborted | failed (no run_start: not a result) | interrupted"""
    returncode: int
    quality: dict
    time_to_train_min: float | None
    log: str
    result_file: str | None
    run_dir: str


def summarize(plan, returncode: int, events: list[dict]) -> RunResult:
    """The run's outcome from its MLPerf log events (first run_start/run_stop, last eval per metric)."""
    first = {}
    quality: dict = {}
    for ev in events:
        first.setdefault(ev.get("key"), ev)
        if ev.get("key") == "eval_accuracy":
            metric = ev.get("metadata", {}).get("metric", next(iter(plan.target)))
            quality[metric] = ev.get("value")
    start, stop = first.get("run_start"), first.get("run_stop")
    ttt = (stop["time_ms"] - start["time_ms"]) / 60000 if start and stop else None
    status = (
        stop.get("metadata", {}).get("status", "aborted") if stop else ("failed" if not start else "aborted")
    )
    return RunResult(
        plan.run_index, plan.seed, status, returncode, quality, ttt, plan.log_path, None, plan.run_dir
    )


class _Collector:
    def __init__(self, resolved: Resolved, results_dir: Path, progress: Progress):
        self.r, self.root, self.progress = resolved, results_dir, progress
        self.results: dict[int, RunResult] = {}

    def poll(self, plan) -> None:
        self.progress.poll(plan)

    def status(self, plan, text: str) -> None:
        """Launcher news about a run (e.g. 'slurm job 12 running 0:05'); optional for launchers."""
        self.progress.say(f"run {plan.run_index + 1}/{self.progress.total} {plan.benchmark}: {text}")

    def finished(self, plan, returncode: int) -> None:
        self.progress.poll(plan)
        events = read_events(Path(plan.log_path))
        keys = {ev.get("key") for ev in events}
        if "run_start" in keys and "run_stop" not in keys:
            # The process died without logging its end (crash, kill -9): the run is aborted.
            log = MLLog(plan.log_path)
            log.run_started = True
            log.run_stop(False, {"error": f"training process exited with code {returncode}"})
            log.close()
            events = read_events(Path(plan.log_path))  # now with the run_stop just written
        res = summarize(plan, returncode, events)
        if "run_start" in keys:
            folder = writer.result_dir(self.root, plan.submission.org, plan.submission.system, plan.benchmark)
            replaces = resume.replaces_result(plan)  # a resumed run keeps its aborted attempt's number
            if replaces is not None and replaces.parent.resolve() == folder.resolve():
                target = writer.replace_result(Path(plan.log_path), replaces)
            else:
                target = writer.claim_result(Path(plan.log_path), folder)
            res.result_file = str(target)
        self.results[plan.run_index] = res


def prepare(plans, system) -> None:
    """Generate tiny data / validate full data once, in a child process (it imports torch)."""
    plan = plans[0]
    if is_prepared(plan):
        return
    rc, last = launch.get("local").run_module(plan, system, entry_module(plan, ".prepare"))
    cause = last.removeprefix("error: ").strip()
    if rc == 2:
        raise ConfigError(cause or f"data for {plan.benchmark} ({plan.size}) is not usable")
    if rc != 0:
        raise HarnessError(
            f"preparing data for {plan.benchmark} failed (exit {rc}): {cause} "
            f"(see {Path(plan.run_dir) / 'prepare.log'})"
        )


def execute(
    resolved: Resolved, results_dir: Path, quiet: bool = False, apply_tuning: bool = False
) -> list[RunResult]:
    plans = resolved.plans
    if plans[0].size == "full" and plans[0].device == "cpu":
        raise ConfigError(
            f"{plans[0].benchmark} at full size needs GPUs; system '{resolved.system.name}' has "
            f"CPU accelerators (use --size tiny, or --dry-run to inspect the full-size plan)"
        )
    write_plans(plans)
    results_dir = Path(results_dir)
    writer.write_system_json(
        results_dir, resolved.system.submitter, resolved.system.name, resolved.system.export_official()
    )
    prepare(plans, resolved.system)
    progress = Progress(len(plans), quiet=quiet)
    collector = _Collector(resolved, results_dir, progress)
    launcher = launch.get(resolved.launcher, apply_tuning=apply_tuning)
    old_term = _sigterm_as_interrupt()
    try:
        launcher.run(plans, resolved.system, resolved.definition.entrypoint, collector)
    except KeyboardInterrupt:
        for plan in plans:
            if plan.run_index not in collector.results:
                collector.finished(plan, 130)
            if collector.results[plan.run_index].returncode == 130:
                collector.results[plan.run_index].status = "interrupted"
        raise
    finally:
        progress.stop()
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
    return [collector.results[i] for i in sorted(collector.results)]


def _sigterm_as_interrupt():
    """SIGTERM to `mlperf run` (kill, scancel, a CI timeout) takes the Ctrl-C path: the runs are
    stopped at a step boundary, logged aborted and claimed, instead of orphaned mid-run."""

    def _raise(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _raise)


def as_dict(r: RunResult) -> dict:
    return asdict(r)
