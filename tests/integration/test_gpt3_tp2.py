"""Tiny GPT-3 with tensor parallelism: torchrun, 2 ranks, TP=2 over gloo, same target."""

from __future__ import annotations

import pytest
from gpt3_helpers import events, make_plan, official_check, prepared_data_dir, train


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return prepared_data_dir(tmp_path_factory)


def test_tp2_two_ranks_reach_target_from_the_tp1_checkpoint(tmp_path, data_dir):
    plan = make_plan(tmp_path, data_dir, seed=3, nproc=2, sets=["tensor_model_parallel_size=2"])
    assert (plan.layout.tp, plan.layout.dp, plan.layout.world_size) == (2, 1, 2)
    r = train(plan, nproc=2)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    ev = events(plan.log_path)
    acc = [e["value"] for e in ev if e["key"] == "eval_accuracy"]
    assert acc[-1] <= plan.target["log_perplexity"]
    assert sum(e["key"] == "run_start" for e in ev) == 1  # rank 0 only
    c = official_check(plan.log_path)
    assert c.returncode == 0, c.stdout + c.stderr
