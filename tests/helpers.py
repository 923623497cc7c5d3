"""What several test modules do the same way: plan a tiny run with the harness's own planner, start
a reference implementation on it, read its MLLOG events, and run the official compliance checker
with the tiny rules (as `mlperf check` does for a tiny log).

Importable as `helpers` from any test module: pytest puts tests/ on sys.path (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY_RULES = REPO / "benchmarks" / "tiny_common.yaml"


def make_plan(benchmark: str, tmp_path: Path, **kw):
    """One plan from `harness.run.execute.make_plans` (cpu-local, tiny unless kw says otherwise), its
    results under tmp_path/results; plan.json is written, so the plan can be started as it is."""
    from harness.run.execute import make_plans

    kw.setdefault("size", "tiny")
    return make_plans(benchmark, kw.pop("system", "cpu-local"), results_dir=tmp_path / "results", **kw)[0]


def plan_file(plan, task: str = "train") -> Path:
    """The plan.json a process is started with: the run's own, or a copy whose `task` is `task`
    (what `mlperf prepare` / `lr-find` write)."""
    if task == "train":
        return Path(plan.run_dir) / "plan.json"
    path = Path(plan.run_dir) / f"{task}.plan.json"
    plan.model_copy(update={"task": task}).save(path)
    return path


def run_entry(
    module: str, plan, nproc: int = 1, timeout: float = 600, env: dict | None = None, task: str = "train"
) -> subprocess.CompletedProcess:
    """`python -m MODULE --plan PLAN` (the plan with `task`), under torchrun when nproc > 1."""
    argv = [module, "--plan", str(plan_file(plan, task))]
    if nproc > 1:
        argv = ["torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", "-m", *argv]
    return subprocess.run(
        [sys.executable, "-m", *argv], env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


def events(log_path) -> list[dict]:
    """Every `:::MLLOG {...}` record of a log, in order; a malformed one fails the test."""
    return [
        json.loads(line.split(":::MLLOG ", 1)[1])
        for line in Path(log_path).read_text().splitlines()
        if ":::MLLOG " in line
    ]


def official_check(log_path) -> subprocess.CompletedProcess:
    """mlperf_logging's compliance checker (ruleset 4.0.0) with the tiny rules on one log."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mlperf_logging.compliance_checker",
            "--usage",
            "training",
            "--ruleset",
            "4.0.0",
            "--config",
            str(TINY_RULES),
            "--log_output",
            os.devnull,
            str(log_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def mlperf_argv(*args: str) -> list[str]:
    """`mlperf ARGS` as an argv for Popen (the CLI module, so the checkout's code runs)."""
    return [sys.executable, "-m", "harness.cli", *args]


def env() -> dict:
    """The environment of the `mlperf`/rank processes a test starts: one thread each (the CI has 2
    cores), no warnings, this checkout importable."""
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", PYTHONPATH=str(REPO))


def one_run_args(benchmark: str, results: Path, data_dir: Path, seed: int, *extra: str) -> list[str]:
    """The arguments of `mlperf run BENCHMARK` for one tiny run on cpu-local with JSON output;
    `extra` (e.g. `--nproc-per-node 2`) goes before the run options."""
    run = ["--runs", "1", "--seed", str(seed), "--results-dir", str(results), "--data-dir", str(data_dir)]
    return ["run", benchmark, "--system", "cpu-local", *extra, *run, "--json"]


def resume_run(benchmark: str, run_dir: Path) -> dict:
    """`mlperf run BENCHMARK --resume RUN_DIR --json`, which must exit 0; its one run's record."""
    r = subprocess.run(
        mlperf_argv("run", benchmark, "--resume", str(run_dir), "--json"),
        cwd=REPO,
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return json.loads(r.stdout)["runs"][0]


def kill_tree(root: int) -> list[int]:
    """SIGKILL `root` and every descendant, root first (nothing may finalize a log after it);
    returns the descendants' pids. Walks the tree rather than a process group: torch elastic
    starts each rank in a session of its own."""
    import psutil

    try:
        top = psutil.Process(root)
        kids = top.children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    for p in (top, *kids):
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs([top, *kids], timeout=10)
    return [p.pid for p in kids]


def _has_checkpoint(run: Path) -> bool:
    return bool(list((run / "checkpoints").glob("step_*/manifest.json")))


def kill_after_first_checkpoint(
    argv: list[str], runs: Path, deadline_s: float = 600, ready=_has_checkpoint
) -> tuple[Path, list[int]]:
    """Start `mlperf run ...` (argv) in the background, kill -9 its whole process tree as soon as
    `ready(run_folder)` (default: the first checkpoint's manifest is there) for the run folder
    under `runs`; returns that folder and the killed descendants' pids. The run must still be
    going then (a run that finished first proves nothing about resume), and its log must not be
    finalized."""
    import time

    cli = subprocess.Popen(
        argv, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline, run = time.monotonic() + deadline_s, None
    try:
        while time.monotonic() < deadline and cli.poll() is None:
            dirs = list(runs.glob("*")) if runs.exists() else []
            run = dirs[0] if dirs else None
            if run and ready(run):
                break
            time.sleep(0.02)
        assert cli.poll() is None, cli.communicate()
        killed = kill_tree(cli.pid)
        cli.communicate(timeout=30)
    finally:
        if cli.poll() is None:
            kill_tree(cli.pid)
    assert b'"run_stop"' not in (run / "mlperf.log").read_bytes()
    return run, killed


def killed_and_resumed(benchmark: str, results: Path, data_dir: Path, seed: int, *extra: str) -> Path:
    """`mlperf run BENCHMARK --runs 1` killed (kill -9, whole tree) right after its first
    checkpoint, then `mlperf run BENCHMARK --resume RUN_DIR` to the target. Checks what every
    resumed run must show and returns the run folder: one run_start, one run_stop (success), one
    harness_resumed after run_start with the lost time; no evaluation logged twice; every
    evaluation the kill discarded comes out the same after the resume (same data, optimizer,
    schedule and RNG state; rel 1e-5 for fp32 on CPU)."""
    import pytest

    from benchmarks import get

    name = get(benchmark).name
    argv = mlperf_argv(*one_run_args(benchmark, results, data_dir, seed, *extra))
    run, _ = kill_after_first_checkpoint(argv, results / "runs" / name / "cpu-local")
    record = resume_run(benchmark, run)
    assert record["status"] == "success", record
    ev = events(run / "mlperf.log")
    keys = [e["key"] for e in ev]
    assert keys.count("run_start") == keys.count("run_stop") == keys.count("harness_resumed") == 1
    assert ev[keys.index("run_stop")]["metadata"]["status"] == "success"
    assert keys.index("run_start") < keys.index("harness_resumed")
    assert ev[keys.index("harness_resumed")]["metadata"]["lost_ms"] > 0
    evals = {json.dumps(e["metadata"], sort_keys=True): e["value"] for e in ev if e["key"] == "eval_accuracy"}
    assert len(evals) == keys.count("eval_accuracy")
    resume = json.loads((run / "resume.json").read_text())["resumes"][-1]
    discarded = events(run / resume["discarded_file"]) if resume["discarded_file"] else []
    for e in discarded:
        if e["key"] == "eval_accuracy":
            assert evals[json.dumps(e["metadata"], sort_keys=True)] == pytest.approx(e["value"], rel=1e-5)
    return run
