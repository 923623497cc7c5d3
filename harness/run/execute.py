"""Run resolved plans: write them, prepare data on demand, launch, finalize each log, claim results.

r = resolve(benchmarks.get("gpt3"), "cpu-local", runs=3)   # RunPlans (the planner fills untuned systems)
results = execute(r, Path("results"), progress)
"""

from __future__ import annotations

import signal
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from benchmarks.benchmark import Benchmark
from harness.core import tree
from harness.core.errors import ConfigError, HarnessError
from harness.core.mllog import MLLog
from harness.core.mllog_reader import read_events
from harness.core.runfolder import PLAN_FILE
from harness.core.runplan import RunPlan
from harness.resolve import switches
from harness.resolve.runplans import Resolved, resolve_runs, runnable
from harness.run import claim, launch, resume


def resolve(bench: Benchmark, system: str, size: str | None = None, **kw) -> Resolved:
    """`resolve_runs` with the planner's best layout for full-size systems without a tuned config."""
    from harness import planner

    return resolve_runs(bench, system, size, fallback=planner.best_config, **kw)


def write_plans(plans: list[RunPlan]) -> None:
    for p in plans:
        Path(p.run_dir).mkdir(parents=True, exist_ok=True)
        p.save(Path(p.run_dir) / PLAN_FILE)


def make_plans(
    bench: Benchmark, system: str, size: str | None = "tiny", runs: int = 1, **kw
) -> list[RunPlan]:
    """Resolve and write plan.json files (what tests and `mlperf prepare` use)."""
    r = resolve(bench, system, size=size, runs=runs, **kw)
    write_plans(r.plans)
    return r.plans


class Reporter(Protocol):
    """Where live progress goes (harness/commands/progress.py draws it; the run layer never prints)."""

    total: int

    def poll(self, plan: RunPlan) -> None: ...

    def say(self, text: str) -> None: ...

    def stop(self) -> None: ...


class Silent:
    def __init__(self, total: int = 0):
        self.total = total

    def poll(self, plan) -> None:
        pass

    def say(self, text: str) -> None:
        pass

    def stop(self) -> None:
        pass


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
    power: str | None = None
    """Power mode: how many readings the run's power logs hold, or why the result has none."""


def summarize(plan, returncode: int, events: list[dict]) -> RunResult:
    """The run's outcome from its MLPerf log events (first run_start/run_stop, the last eval per
    metric before run_stop)."""
    first = {}
    quality: dict = {}
    for ev in events:
        first.setdefault(ev.get("key"), ev)
        if "run_stop" in first:  # power mode trains on after run_stop: not the result's quality
            break
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
    def __init__(self, resolved: Resolved, results_dir: Path, progress: Reporter):
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
            folder = tree.result_dir(
                self.root, plan.submission.org, plan.submission.system, plan.submission_benchmark
            )
            replaces = resume.replaces_result(plan)  # a resumed run keeps its aborted attempt's number
            if replaces is not None and replaces.parent.resolve() == folder.resolve():
                target = claim.replace_result(Path(plan.log_path), replaces)
            else:
                target = claim.claim_result(Path(plan.log_path), folder)
            res.result_file = str(target)
            if self.r.system.power is not None:
                self._power_files(plan, res, target)
        self.results[plan.run_index] = res

    def _power_files(self, plan, res: RunResult, result_file: Path) -> None:
        from harness.run.power import files

        extends = runnable(self.r.benchmark).power_extension
        _written, res.power = files.write(
            Path(plan.run_dir), self.r.system.power, result_file, plan.power_min_readings, extends
        )
        self.status(plan, f"power: {res.power}")  # live; the table repeats it after the runs


def prepare(bench: Benchmark, plans: list[RunPlan], system) -> None:
    """Generate tiny data / validate full data once, in a child process (it imports torch)."""
    plan = plans[0]
    impl = runnable(bench)
    if impl.data.is_prepared(plan):
        return
    Path(plan.run_dir).mkdir(parents=True, exist_ok=True)
    plan_file = Path(plan.run_dir) / "prepare.plan.json"
    plan.model_copy(update={"task": "prepare"}).save(plan_file)
    rc, last = launch.get("local").run_module(plan, system, impl.module, plan_file, cpu_only=True)
    cause = last.removeprefix("error: ").strip()
    if rc == 2:
        raise ConfigError(cause or f"data for {plan.benchmark} ({plan.size}) is not usable")
    if rc != 0:
        raise HarnessError(
            f"preparing data for {plan.benchmark} failed (exit {rc}): {cause} "
            f"(see {Path(plan.run_dir) / 'prepare.log'})"
        )


def execute(
    resolved: Resolved,
    results_dir: Path,
    progress: Reporter | None = None,
    apply_tuning: bool = False,
    allow_extra_runs: bool = False,
) -> list[RunResult]:
    """`allow_extra_runs` (`mlperf run --allow-extra-runs`): claim runs past the benchmark's
    runs_per_result into a folder that already holds them."""
    plans = resolved.plans
    if plans[0].size == "full" and plans[0].device == "cpu":
        raise ConfigError(
            f"{plans[0].benchmark} at full size needs GPUs; system '{resolved.system.name}' has "
            f"CPU accelerators (use --size tiny, or --dry-run to inspect the full-size plan)"
        )
    # Before anything is written: a switch whose library is absent would fail inside the rank
    # after run_start, i.e. as "target not reached" (exit 3), instead of a refusal (exit 2).
    switches.require_libraries(resolved.benchmark, plans[0].config)
    results_dir = Path(results_dir)
    _refuse_other_rounds(plans[0], results_dir)
    _refuse_full_folder(resolved, results_dir, allow_extra_runs)
    write_plans(plans)
    claim.write_system_json(
        results_dir, resolved.system.submitter, resolved.system.name, resolved.system.export_official()
    )
    prepare(resolved.benchmark, plans, resolved.system)
    progress = progress or Silent(len(plans))
    collector = _Collector(resolved, results_dir, progress)
    launcher = launch.get(resolved.launcher, apply_tuning=apply_tuning)
    old_term = _sigterm_as_interrupt()
    try:
        launcher.run(plans, resolved.system, runnable(resolved.benchmark).module, collector)
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


def _refuse_other_rounds(plan, results_dir: Path) -> None:
    """One submission folder is one round's runs at one size: a run under another ruleset, or of
    another size, than the logs already there would make a folder no checker accepts as one
    result (`mlperf check` flags one)."""
    sub = plan.submission
    folder = tree.result_dir(results_dir, sub.org, sub.system, plan.submission_benchmark)
    for what, found, mine, fix in (
        ("ruleset", tree.rulesets_in(folder), plan.ruleset, "--ruleset {}"),
        ("size", tree.sizes_in(folder), plan.size, None),  # the size is what the user asked for
    ):
        other = {v: names for v, names in found.items() if v != mine}
        if other:
            v, names = next(iter(other.items()))
            raise ConfigError(
                f"{folder} holds runs made {'under ruleset' if what == 'ruleset' else 'at size'} {v} "
                f"({', '.join(names)}), this run's is {mine}: one submission folder is one round's runs "
                f"at one size; pass {fix.format(v) + ', or ' if fix else ''}--results-dir with another tree"
            )


def _refuse_full_folder(resolved: Resolved, results_dir: Path, allow: bool) -> None:
    """Where a run picks its result_<i>.txt (claim.claim_result): count what the folder holds
    first. A resumed run that takes over its claimed number adds no file."""
    sub = resolved.plans[0].submission
    folder = tree.result_dir(results_dir, sub.org, sub.system, resolved.plans[0].submission_benchmark)
    adding = sum(1 for p in resolved.plans if resume.replaces_result(p) is None)
    need = resolved.benchmark.rules.runs_per_result
    claim.refuse_full_folder(folder, need, adding, allow)


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
