"""GPT-3 checkpoints through megatron-core dist_checkpointing under the distributed optimizer
(torchrun, 2 ranks, gloo): what is saved is the optimizer's real state, and it loads back exactly
and at another layout. The worker (gpt3_dist_ckpt_worker.py) says what each figure means."""

from __future__ import annotations

import pytest
from gpt3_helpers import REPO
from helpers import worker_result

pytestmark = pytest.mark.slow  # trains or starts rank processes: not in the -m 'not slow' loop


def test_saved_checkpoint_holds_master_weights_and_moments_and_reshards(tmp_path):
    worker = REPO / "tests" / "integration" / "gpt3_dist_ckpt_worker.py"
    res = worker_result(worker, str(tmp_path), nproc=2)
    # Each rank's fp32 master weight shards, exp_avg and exp_avg_sq come back bit for bit, with
    # Adam's step (3) per parameter...
    assert res["shards"] > 0 and res["state_equal"] and res["steps_equal"], res
    # ...so the next step is the one the saved run takes (same layout: bitwise).
    (loss_a, eval_a), (loss_b, eval_b) = res["continued"]
    assert (loss_a, eval_a) == (loss_b, eval_b) and res["params_equal"], res
    # TP=2 from a DP=2 checkpoint (model-space form): the same step up to fp32 reduction order.
    # A wrong Adam step count alone moved it by 3e-3 (measured while building this test).
    loss_c, eval_c = res["other_layout"]
    assert abs(loss_c - loss_a) <= 1e-5 * loss_a and abs(eval_c - eval_a) <= 1e-5 * eval_a, res
    # Written in parallel: both ranks wrote shard files into each checkpoint folder.
    for folder in ("run", "moved"):
        writers = {p.name.split("_")[2] for p in (tmp_path / folder).glob("__*_*.distcp")}
        assert writers == {"0", "1"}, sorted(p.name for p in (tmp_path / folder).iterdir())
