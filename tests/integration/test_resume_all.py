"""kill -9 + `mlperf run BENCH --resume RUN_DIR` for every benchmark with resumable checkpoints
besides gpt3 (test_gpt3_resume.py): a tiny 1-process run is killed (the whole process tree) right
after its first checkpoint, resumed, reaches the target, and its one log passes the official
checker with the tiny rules: one run_start, one run_stop, one harness_resumed."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from helpers import REPO, env, events, kill_tree, mlperf_argv, official_check, one_run_args, resume_run


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
    argv = mlperf_argv(*one_run_args(bench, results, tmp_path / "data", seed))
    cli = subprocess.Popen(
        argv, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
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
        kill_tree(cli.pid)
        cli.communicate(timeout=30)
    finally:
        if cli.poll() is None:
            kill_tree(cli.pid)
    log = run / "mlperf.log"
    assert b'"run_stop"' not in log.read_bytes()

    run_record = resume_run(bench, run)
    assert run_record["status"] == "success", run_record

    ev = events(log)
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
    discarded = events(run / record["discarded_file"]) if record["discarded_file"] else []
    for e in discarded:
        if e["key"] == "eval_accuracy":
            assert redone[json.dumps(e["metadata"], sort_keys=True)] == pytest.approx(e["value"], rel=1e-5)
    c = official_check(log)
    assert c.returncode == 0, c.stdout[-3000:] + c.stderr[-3000:]
