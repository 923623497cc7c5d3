"""Tiny GPT-3 in one process: prepare, train to the target, and pass the official checker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpt3_helpers import events, make_plan, official_check, prepared_data_dir, train


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return prepared_data_dir(tmp_path_factory)


def test_prepare_writes_manifest_with_hashes_and_entropy(data_dir):
    m = json.loads((data_dir / "PREPARED.json").read_text())
    assert set(m["files"]) >= {
        "c4_synth_train_00.bin",
        "c4_synth_train_01.idx",
        "c4_synth_validation.bin",
        "checkpoint/tiny_ckpt.pt",
    }
    assert all(len(f["sha256"]) == 64 for f in m["files"].values())
    assert 1.0 < m["entropy_rate_nats"] < 1.2 and m["checkpoint_step"] == 150
    assert m["checkpoint_val_log_ppl"] > 1.18  # the run has something left to learn
    import torch

    state = torch.load(data_dir / "checkpoint" / "tiny_ckpt.pt", weights_only=True)
    assert state["step"] == 150 and "embedding.word_embeddings.weight" in state["model"] and state["adam"]


def test_one_process_reaches_target_and_log_passes_official_checker(tmp_path, data_dir):
    plan = make_plan(tmp_path, data_dir, seed=1)
    r = train(plan)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    ev = events(plan.log_path)
    keys = [e["key"] for e in ev]
    # Prologue order (harness/core/mllog.py) and the gpt3 keys of closed_gpt3.yaml.
    assert keys.index("submission_division") < keys.index("init_stop") < keys.index("run_start")
    for k in (
        "train_samples",
        "eval_samples",
        "init_checkpoint_step",
        "opt_learning_rate_decay_steps",
        "opt_weight_decay",
        "gradient_accumulation_steps",
        "max_sequence_length",
    ):
        assert keys.index(k) < keys.index("init_stop"), k
    acc = [e for e in ev if e["key"] == "eval_accuracy"]
    seq, gbs = plan.config["max_sequence_length"], plan.config["global_batch_size"]
    every = -(-plan.config["eval_interval_samples"] // gbs)
    assert [e["metadata"]["epoch_num"] for e in acc] == [every * gbs * seq * (i + 1) for i in range(len(acc))]
    assert acc[-1]["value"] <= plan.target["log_perplexity"] < acc[0]["value"]
    assert ev[-1]["key"] == "run_stop" and ev[-1]["metadata"]["status"] == "success"
    assert keys.count("block_start") == keys.count("block_stop") == len(acc)
    c = official_check(plan.log_path)
    assert c.returncode == 0, c.stdout + c.stderr
    rows = [json.loads(x) for x in (Path(plan.run_dir) / "timings.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, len(rows) + 1)) and len(rows) == every * len(acc)
    assert all(r["step_time_s"] > 0 and r["max_rss_mb"] > 0 for r in rows)
    assert [r["step"] for r in rows if r["loss"] is not None] == [every * (i + 1) for i in range(len(acc))]


def test_cap_without_target_is_aborted_with_exit_3(tmp_path, data_dir):
    plan = make_plan(tmp_path, data_dir, seed=2, sets=["train_samples_cap=96"])  # 6 steps, 1 eval
    r = train(plan)
    assert r.returncode == 3, r.stderr[-3000:]
    ev = events(plan.log_path)
    assert ev[-1]["key"] == "run_stop" and ev[-1]["metadata"]["status"] == "aborted"
    assert [e["metadata"]["epoch_num"] for e in ev if e["key"] == "eval_accuracy"] == [6 * 16 * 64]


def test_unprepared_data_dir_is_a_config_error(tmp_path):
    plan = make_plan(tmp_path, tmp_path / "empty", seed=3)
    r = train(plan)
    assert r.returncode == 2 and "mlperf prepare gpt3" in r.stderr
