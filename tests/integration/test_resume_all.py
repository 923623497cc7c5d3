"""kill -9 + `mlperf run BENCH --resume RUN_DIR` for every benchmark with resumable checkpoints
besides gpt3 (test_gpt3_resume.py): a tiny 1-process run is killed (the whole process tree) right
after its first checkpoint, resumed, reaches the target, and its one log passes the official
checker with the tiny rules: one run_start, one run_stop, one harness_resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TINY_RULES = REPO / "benchmarks" / "tiny_common.yaml"


def _env() -> dict:
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", PYTHONPATH=str(REPO))


def _mlperf(*args):
    return [sys.executable, "-m", "harness.cli", *args]


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:  # ppid
            out.append(int(stat.parent.name))
    return out


def _kill_tree(root: int) -> None:
    tree, todo = [], [root]
    while todo:
        kids = _children(todo.pop())
        tree += kids
        todo += kids
    for pid in [root, *tree]:  # the runner first: nothing may finalize the log
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _events(log: Path) -> list[dict]:
    return [
        json.loads(ln.split(":::MLLOG ", 1)[1]) for ln in log.read_text().splitlines() if ":::MLLOG " in ln
    ]


# Seeds of the benchmarks' own tiny tests (calibrated to reach the target early).
@pytest.mark.parametrize(
    "bench, seed",
    [
        ("gnn", 11),
        pytest.param("llama2_70b_lora", 7, marks=pytest.mark.slow),
        pytest.param("stable_diffusion", 1, marks=pytest.mark.slow),
    ],
)
def test_kill9_after_first_checkpoint_then_resume(tmp_path, bench, seed):
    results = tmp_path / "results"
    argv = _mlperf(
        "run",
        bench,
        "--system",
        "cpu-local",
        "--runs",
        "1",
        "--seed",
        str(seed),
        "--results-dir",
        str(results),
        "--data-dir",
        str(tmp_path / "data"),
        "--json",
    )
    cli = subprocess.Popen(
        argv, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    runs = results / "runs" / bench / "cpu-local"
    deadline = time.monotonic() + 240
    run = None
    try:
        while time.monotonic() < deadline and cli.poll() is None:
            dirs = list(runs.glob("*")) if runs.exists() else []
            run = dirs[0] if dirs else None
            if run and list((run / "checkpoints").glob("step_*/manifest.json")):
                break
            time.sleep(0.02)
        assert cli.poll() is None, cli.communicate()
        _kill_tree(cli.pid)
        cli.communicate(timeout=30)
    finally:
        if cli.poll() is None:
            _kill_tree(cli.pid)
    log = run / "mlperf.log"
    assert b'"run_stop"' not in log.read_bytes()

    r = subprocess.run(
        _mlperf("run", bench, "--resume", str(run), "--json"),
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["runs"][0]["status"] == "success", doc

    ev = _events(log)
    keys = [e["key"] for e in ev]
    assert keys.count("run_start") == keys.count("run_stop") == keys.count("harness_resumed") == 1
    assert ev[keys.index("run_stop")]["metadata"]["status"] == "success"
    resumed = ev[keys.index("harness_resumed")]
    assert resumed["metadata"]["lost_ms"] > 0
    # Everything up to the checkpoint stayed; what came after it was redone, not logged twice.
    assert keys.index("run_start") < keys.index("harness_resumed")
    evals = [e for e in ev if e["key"] == "eval_accuracy"]
    points = [(json.dumps(e["metadata"], sort_keys=True)) for e in evals]
    assert len(points) == len(set(points))
    # Exact continuation (same data, optimizer, schedule and RNG state): an evaluation the kill
    # discarded comes out the same after the resume.
    record = json.loads((run / "resume.json").read_text())["resumes"][-1]
    redone = dict(zip(points, (e["value"] for e in evals)))
    discarded = _events(run / record["discarded_file"]) if record["discarded_file"] else []
    for e in discarded:
        if e["key"] == "eval_accuracy":
            assert redone[json.dumps(e["metadata"], sort_keys=True)] == pytest.approx(e["value"], rel=1e-5)
    c = subprocess.run(
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
            "/dev/null",
            str(log),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert c.returncode == 0, c.stdout[-3000:] + c.stderr[-3000:]
