"""Tiny GPT-3 prepare: the manifest and checkpoint it writes, and a run on unprepared data. The
one-process run to the target is the quick start's (test_run_gpt3_cli.py, gpt3_helpers.check_tiny_run)."""

from __future__ import annotations

import json

import pytest
from gpt3_helpers import make_plan, prepared_data_dir, train

import benchmarks

pytestmark = pytest.mark.slow  # trains or starts rank processes: not in the -m 'not slow' loop


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
    facts = m["facts"]
    assert 1.0 < facts["entropy_rate_nats"] < 1.2 and facts["checkpoint_step"] == 300
    target = benchmarks.get("gpt3").rules.quality[0].tiny
    assert facts["checkpoint_val_log_ppl"] > target + 0.05  # well above the tiny target: left to learn
    import torch

    state = torch.load(data_dir / "checkpoint" / "tiny_ckpt.pt", weights_only=True)
    assert state["step"] == 300 and "embedding.word_embeddings.weight" in state["model"] and state["adam"]


def test_unprepared_data_dir_is_a_config_error(tmp_path):
    plan = make_plan(tmp_path, tmp_path / "empty", seed=3)
    r = train(plan)
    assert r.returncode == 2 and "mlperf prepare gpt3" in r.stderr
