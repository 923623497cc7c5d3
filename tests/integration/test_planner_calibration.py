"""`mlperf plan --calibrate` on CPU, as issue 15 asks: plan the tiny gpt3 run, calibrate stack
mlperf-harness on ONE finished 1-process run, then predict two runs it has not seen -- 2 processes
with TP=2, and micro-batch 8 (GA 2) -- and compare with their measured time-to-train.

Three tiny runs, made once per module with the real CLI (`mlperf run`) and the same seed, so all
three converge after the same number of steps and the comparison is about time per step.

Noise: this machine has 2 cores shared with other work. Each run's CPU time (its whole process
tree, from getrusage) over its wall time x processes says how much of the machine it got. The
20 % bound is asserted when every run got >= 85 % of its cores (quiet); on a busy machine
timings scale with the load the runs happened to meet, so only a 2x bound is asserted there and
the measured errors and CPU shares are printed either way (pytest -s shows them).
"""

from __future__ import annotations

import json
import resource
import time

import pytest
from conftest import run_mlperf
from gpt3_helpers import prepared_data_dir

pytestmark = pytest.mark.slow
SEED = 5
QUIET_SHARE = 0.85


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    data = prepared_data_dir(tmp_path_factory)
    res = tmp_path_factory.mktemp("cal-results")
    made = {}
    for name, extra, procs in [
        ("one", [], 1),
        ("tp2", ["--nproc-per-node", "2", "--set", "tensor_model_parallel_size=2"], 2),
        ("mbs8", ["--set", "micro_batch_size=8"], 1),
    ]:
        cpu0, t0 = _cpu(), time.time()
        r = run_mlperf(
            "run", "gpt3", "--system", "cpu-local", "--runs", "1", "--seed", str(SEED),
            "--results-dir", str(res), "--data-dir", str(data), *extra, "--json",
        )  # fmt: skip
        assert r.returncode == 0, r.stderr[-3000:]
        share = (_cpu() - cpu0) / ((time.time() - t0) * procs)
        run = json.loads(r.stdout)["runs"][0]
        made[name] = {
            "dir": run["run_dir"],
            "ttt_s": run["time_to_train_min"] * 60,
            "extra": extra,
            "share": share,
        }
    return made


def _plan(mlperf, *args) -> dict:
    r = mlperf("plan", "gpt3", "--system", "cpu-local", *args, "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_calibrated_plan_predicts_unseen_layouts(runs, tmp_path):
    mlperf = run_mlperf
    cal = tmp_path / "cpu-local.yaml"
    env_free = ["--calibration", str(cal)]
    before = _plan(mlperf, "--size", "tiny")
    assert before["predicted_min"] > 0 and before["stack"]["name"] == "mlperf-harness"

    r = mlperf(
        "plan",
        "gpt3",
        "--system",
        "cpu-local",
        "--calibrate",
        runs["one"]["dir"],
        "--out",
        str(cal),
        "--json",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["runs"][0]["measured"]["step_s"] > 0 and doc["tiny"]["gpt3"]["gbs"] == 16

    report, errors = [], {}
    for name in ("one", "tp2", "mbs8"):
        p = _plan(mlperf, *runs[name]["extra"], *env_free)
        assert any(str(cal) in n for n in p["notes"]), p["notes"]  # says which constants it used
        err = p["predicted_min"] * 60 / runs[name]["ttt_s"] - 1
        errors[name] = err
        report.append(
            f"{name}: predicted {p['predicted_min'] * 60:.1f} s, measured {runs[name]['ttt_s']:.1f} s "
            f"({err:+.1%}), CPU share {runs[name]['share']:.2f}"
        )
    print("\n" + "\n".join(report))
    quiet = all(r["share"] >= QUIET_SHARE for r in runs.values())
    for name in ("tp2", "mbs8"):
        assert abs(errors[name]) <= (0.20 if quiet else 1.0), report
