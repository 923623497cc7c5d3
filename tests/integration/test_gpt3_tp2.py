"""Tiny GPT-3 on 2 ranks (torchrun, gloo): TP=2, and the record layouts' switches on a CPU.

Each other 2-layer layout trains to the target once, from the same prepared checkpoint and seed as its
plain counterpart, and its evaluation curve must equal the plain one to LAYOUT_RTOL at every eval;
the DP=2 distributed-optimizer run stops at gpt3_helpers.DP2_STEPS (5 evals, the resume test's
reference too) and the 4-layer PP=2 x VP=2 pair at SHORT_STEPS (3 evals), compared there. Why
that number: every layout computes the same fp32 arithmetic in another order (TP splits the
GEMMs, SP reduce-scatters, the distributed optimizer reduce-scatters the grads, PP/VP and MBS 8 x
GA 2 sum microbatches apart). Measured over a whole curve (14 evals, 336 steps, from the earlier
150-step checkpoint) the differences stay at rounding level: <= 6e-8 (TP=2 + SP + distributed optimizer vs TP=2) and <= 4e-8 (PP=2 +
VP=2 + distributed optimizer + overlapped reduce/gather vs one process), so 1e-5 leaves 100x room.
A real fault is far above it: with the sequence-parallel norms' gradients not summed over TP the
first eval moved by 4e-4 and the last by 1.4e-3; the distributed optimizer starting without
the checkpoint's Adam moments moved the 4-layer model's first eval by 4e-3.
"""

from __future__ import annotations

import subprocess
import warnings
from pathlib import Path

import pytest
from gpt3_helpers import (
    DP2_STEPS,
    EVAL_STEPS,
    dp2_distopt_run,
    env,
    eval_curve,
    events,
    make_plan,
    official_check,
    plain_tp2_run,
    prepared_data_dir,
    record_layout_run,
    train,
)
from helpers import REPO, mlperf_argv

from harness.core.runplan import RunPlan

pytestmark = pytest.mark.slow  # trains or starts rank processes: not in the -m 'not slow' loop

LAYOUT_RTOL = 1e-5
SHORT_STEPS = 3 * EVAL_STEPS  # 3 evals: the faults above show from the first


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return prepared_data_dir(tmp_path_factory)


@pytest.fixture(scope="module")
def plain_tp2(tmp_path_factory, data_dir):
    """Plain TP=2 to the target, once per pytest run (gpt3_helpers.plain_tp2_run)."""
    (run,) = plain_tp2_run(tmp_path_factory, data_dir)["runs"]
    plan = RunPlan.load(Path(run["run_dir"]) / "plan.json")
    assert (plan.layout.tp, plan.layout.dp, plan.layout.world_size) == (2, 1, 2)
    return plan


def assert_stopped_at_max_steps(r: subprocess.CompletedProcess, log, nproc: int = 1):
    """Not reached by max_steps: run_stop aborted and exit 3. torchrun itself exits 1 when a rank
    exits non-zero and names the first one's code in its failure table (the other rank may be
    stopped by torchrun's SIGTERM before its own exit 3: a race, so only the first is asserted)."""
    stops = [e for e in events(log) if e["key"] == "run_stop"]
    assert len(stops) == 1 and stops[0]["metadata"]["status"] == "aborted", stops
    tail = r.stdout[-2000:] + r.stderr[-3000:]
    if nproc == 1:
        assert r.returncode == 3, tail
    else:
        assert r.returncode == 1 and "exitcode  : 3 " in r.stderr, tail


def assert_same_curve(log, reference_log, prefix: bool = False):
    """The same evals to LAYOUT_RTOL; `prefix`: `log` stopped early (max_steps), so its evals are
    the reference's first ones."""
    got, want = eval_curve(log), eval_curve(reference_log)
    if prefix:
        assert 0 < len(got) < len(want), (got, want)
        want = dict(list(want.items())[: len(got)])
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
    assert (
        run["status"] == "success" and run["quality"]["log_perplexity"] <= plain_tp2.target["log_perplexity"]
    )
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
    kills and resumes, uninterrupted, equals the plain curve to LAYOUT_RTOL over its DP2_STEPS."""
    (run,) = dp2_distopt_run(tmp_path_factory, data_dir)["runs"]
    assert run["status"] == "aborted"  # stopped at DP2_STEPS
    plan = RunPlan.load(Path(run["run_dir"]) / "plan.json")
    assert (plan.layout.dp, plan.layout.tp, plan.layout.micro_batch_size) == (2, 1, 8)
    assert plan.config["distributed_optimizer"] and plan.config["overlap_param_gather"]
    assert plan.config["overlap_grad_reduce"]
    assert len(eval_curve(run["log"])) == DP2_STEPS // EVAL_STEPS
    assert_same_curve(run["log"], plain_tp2.log_path, prefix=True)


def test_pp2_vp2_with_distributed_optimizer_and_overlap_matches_one_process(tmp_path, tmp_path_factory):
    """Interleaved pipeline (2 stages x 2 virtual chunks of a 4-layer model, GA 2 as interleaving
    needs) with the distributed optimizer and overlapped grad reduce + param gather. Both runs stop
    at SHORT_STEPS (`max_steps`, the data order unchanged): a wrong schedule or a lost gradient shows
    at the first eval (the module docstring's faults), and the 2-layer layouts above go to the target."""
    # A 4-layer checkpoint of its own, pretrained 24 steps instead of tiny's 300: both runs start
    # from it and stop at SHORT_STEPS, long before any target, so how far it was trained does not
    # matter, only that it holds weights and Adam moments to load and shard (~14 s less prepare).
    shape = ("num_layers=4", "reference_checkpoint_step=24")
    data4 = prepared_data_dir(tmp_path_factory, sets=shape)
    short = [f"max_steps={SHORT_STEPS}"]
    plain = make_plan(tmp_path / "plain", data4, seed=3, sets=[*shape, *short])
    assert_stopped_at_max_steps(train(plain), plain.log_path)
    sets = [
        *shape,
        "pipeline_model_parallel_size=2",
        "virtual_pipeline_model_parallel_size=2",
        "micro_batch_size=8",
        "distributed_optimizer=true",
        "overlap_grad_reduce=true",
        "overlap_param_gather=true",
        *short,
    ]
    plan = make_plan(tmp_path / "vp", data4, seed=3, nproc=2, sets=sets)
    assert (plan.layout.pp, plan.layout.vp, plan.layout.grad_accum) == (2, 2, 2)
    assert plan.config["overlap_grad_reduce"]
    r = train(plan, nproc=2)
    if r.returncode != 0 and "Signal 11 (SIGSEGV)" in r.stderr:
        # The defect in NOTES.md (3 of ~60 runs on megatron-core 0.16.1: heap corruption seen in a
        # gloo worker's async allreduce; none in 82 on 0.19.2): one retry in a fresh folder, on the
        # record; any other failure fails.
        warnings.warn("PP=2 x VP=2 rank died of SIGSEGV (NOTES.md defect): retried once", stacklevel=1)
        plan = make_plan(tmp_path / "vp-retry", data4, seed=3, nproc=2, sets=sets)
        r = train(plan, nproc=2)
    assert_stopped_at_max_steps(r, plan.log_path, nproc=2)
    assert len(eval_curve(plan.log_path)) == SHORT_STEPS // EVAL_STEPS
    assert_same_curve(plan.log_path, plain.log_path)
