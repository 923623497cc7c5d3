"""`mlperf plan --calibrate` on CPU, as issue 15 asks: plan the tiny gpt3 run, calibrate stack
mlperf-harness on ONE finished 1-process run, then predict two runs it has not seen -- 2 processes
with TP=2, and micro-batch 8 (GA 2) -- and compare with their measured time-to-train.

Three tiny runs of the real CLI (`mlperf run`) with the same seed (3), so all three converge after
the same number of steps and the comparison is about time per step. Each is made once per pytest
run and shared: the one-process run is the quick start's first (gpt3_helpers.quickstart_run), the
TP=2 run is the layout tests' reference (gpt3_helpers.plain_tp2_run); only the MBS 8 run is this
test's own.

Noise: this machine has 2 cores shared with other work. Each run's CPU time (its whole process
tree, from getrusage) over its wall time x processes says how much of the machine it got. The
20 % bound is asserted when every run got >= 85 % of its cores (quiet); on a busy machine
timings scale with the load the runs happened to meet, so only a 2x bound is asserted there and
the measured errors and CPU shares are printed either way (pytest -s shows them).
"""

from __future__ import annotations

import json

import pytest
from conftest import run_mlperf
from gpt3_helpers import PLAIN_TP2, cli_run, plain_tp2_run, prepared_data_dir, quickstart_run

pytestmark = pytest.mark.slow
QUIET_SHARE = 0.85
MBS8 = ("--set", "micro_batch_size=8")


def _measured(doc: dict, procs: int, extra) -> dict:
    run = doc["runs"][0]
    m = doc["measured"]
    return {
        "dir": run["run_dir"],
        "ttt_s": run["time_to_train_min"] * 60,
        "extra": list(extra),
        "share": m["cpu_s"] / (m["wall_s"] * procs),
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    data = prepared_data_dir(tmp_path_factory)
    return {
        "one": _measured(quickstart_run(tmp_path_factory), 1, []),
        "tp2": _measured(plain_tp2_run(tmp_path_factory, data), 2, PLAIN_TP2),
        "mbs8": _measured(cli_run(tmp_path_factory, "gpt3-mbs8", data, 3, *MBS8), 1, MBS8),
    }


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
