"""Tiny GPT-3 on 2 ranks (torchrun, gloo): TP=2, and the record layouts' switches on a CPU.

Each layout trains to the target once, from the same prepared checkpoint and seed as its plain
counterpart, and its evaluation curve must equal the plain one to LAYOUT_RTOL at every eval. Why
that number: every layout computes the same fp32 arithmetic in another order (TP splits the
GEMMs, SP reduce-scatters, the distributed optimizer reduce-scatters the grads, PP/VP and MBS 8 x
GA 2 sum microbatches apart). Measured over the whole curve (14 evals, 336 steps) the differences
stay at rounding level: <= 6e-8 (TP=2 + SP + distributed optimizer vs TP=2) and <= 4e-8 (PP=2 +
VP=2 + distributed optimizer + overlapped reduce/gather vs one process), so 1e-5 leaves 100x room.
A real fault is far above it: with the sequence-parallel norms' gradients not summed over TP the
first eval moved by 4e-4 and the last by 1.4e-3; the distributed optimizer starting without
the checkpoint's Adam moments moved the 4-layer model's first eval by 4e-3.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from gpt3_helpers import (
    dp2_distopt_run,
    env,
    eval_curve,
    events,
    make_plan,
    official_check,
    prepared_data_dir,
    record_layout_run,
    train,
)
from helpers import REPO, mlperf_argv, once_per_run

from harness.core.runplan import RunPlan

pytestmark = pytest.mark.slow  # trains or starts rank processes: not in the -m 'not slow' loop

LAYOUT_RTOL = 1e-5


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return prepared_data_dir(tmp_path_factory)


@pytest.fixture(scope="module")
def plain_tp2(tmp_path_factory, data_dir):
    """Plain TP=2 to the target, once per pytest run (a module fixture is made once per xdist
    worker that runs one of the module's tests)."""

    def make(folder):
        plan = make_plan(folder, data_dir, seed=3, nproc=2, sets=["tensor_model_parallel_size=2"])
        r = train(plan, nproc=2)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]

    folder = once_per_run(tmp_path_factory, "gpt3-plain-tp2", make)
    plan = RunPlan.load(next((folder / "results").glob("runs/gpt3/cpu-local/*/plan.json")))
    assert (plan.layout.tp, plan.layout.dp, plan.layout.world_size) == (2, 1, 2)
    return plan


def assert_same_curve(log, reference_log):
    got, want = eval_curve(log), eval_curve(reference_log)
    assert list(got) == list(want), (got, want)  # the same eval points: the target at the same step
    for tokens, value in want.items():
        assert got[tokens] == pytest.approx(value, rel=LAYOUT_RTOL), (tokens, got[tokens], value)


def test_tp2_two_ranks_reach_target_from_the_tp1_checkpoint(plain_tp2):
    ev = events(plain_tp2.log_path)
    acc = [e["value"] for e in ev if e["key"] == "eval_accuracy"]
    assert acc[-1] <= plain_tp2.target["log_perplexity"]
    assert sum(e["key"] == "run_start" for e in ev) == 1  # rank 0 only
    c = official_check(plain_tp2.log_path)
    assert c.returncode == 0, c.stdout + c.stderr


def test_record_switches_at_tp2_reach_target_pass_check_and_match_plain(
    tmp_path_factory, data_dir, plain_tp2
):
    """`mlperf run gpt3 --system cpu-local --nproc-per-node 2 --set tensor_model_parallel_size=2
    --set sequence_parallel=true --set distributed_optimizer=true --runs 1`, then `mlperf check`."""
    doc = record_layout_run(tmp_path_factory, data_dir)
    (run,) = doc["runs"]
    assert run["status"] == "success" and run["quality"]["log_perplexity"] <= 1.18
    plan = (Path(run["run_dir"]) / "plan.json").read_text()
    assert '"sequence_parallel": true' in plan and '"distributed_optimizer": true' in plan
    c = subprocess.run(mlperf_argv("check", run["log"]), cwd=REPO, env=env(), capture_output=True, text=True)
    assert c.returncode == 0, c.stdout + c.stderr
    assert_same_curve(run["log"], plain_tp2.log_path)


def test_distributed_optimizer_sharded_over_dp2_with_overlap_matches_plain(
    tmp_path_factory, data_dir, plain_tp2
):
    """DP=2 x MBS 8 with the distributed optimizer (each rank owns half of the master weights and
    Adam moments), overlapped grad reduce-scatter and param all-gather: the run the resume test
    kills and resumes, uninterrupted, equals the plain curve to LAYOUT_RTOL."""
    (run,) = dp2_distopt_run(tmp_path_factory, data_dir)["runs"]
    assert run["status"] == "success"
    plan = RunPlan.load(Path(run["run_dir"]) / "plan.json")
    assert (plan.layout.dp, plan.layout.tp, plan.layout.micro_batch_size) == (2, 1, 8)
    assert plan.config["distributed_optimizer"] and plan.config["overlap_param_gather"]
    assert plan.config["overlap_grad_reduce"]
    assert_same_curve(run["log"], plain_tp2.log_path)


def test_pp2_vp2_with_distributed_optimizer_and_overlap_matches_one_process(tmp_path, tmp_path_factory):
    """Interleaved pipeline (2 stages x 2 virtual chunks of a 4-layer model, GA 2 as interleaving
    needs) with the distributed optimizer and overlapped grad reduce + param gather."""
    data4 = prepared_data_dir(tmp_path_factory, sets=("num_layers=4",))
    plain = make_plan(tmp_path / "plain", data4, seed=3, sets=["num_layers=4"])
    r = train(plain)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    sets = [
        "num_layers=4",
        "pipeline_model_parallel_size=2",
        "virtual_pipeline_model_parallel_size=2",
        "micro_batch_size=8",
        "distributed_optimizer=true",
        "overlap_param_gather=true",
    ]
    plan = make_plan(tmp_path / "vp", data4, seed=3, nproc=2, sets=sets)
    assert (plan.layout.pp, plan.layout.vp, plan.layout.grad_accum) == (2, 2, 2)
    assert plan.config["overlap_grad_reduce"]  # the default
    r = train(plan, nproc=2)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert eval_curve(plan.log_path)[max(eval_curve(plan.log_path))] <= plan.target["log_perplexity"]
    c = official_check(plan.log_path)
    assert c.returncode == 0, c.stdout + c.stderr
    assert_same_curve(plan.log_path, plain.log_path)
