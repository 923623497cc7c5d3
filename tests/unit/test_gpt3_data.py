"""Tiny GPT-3 data: a deterministic Markov source with a known entropy rate, Megatron's format."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

import benchmarks
from benchmarks.gpt3 import DATA as manifest
from harness.core.data_manifest import sha256
from reference_impls.megatron_gpt import data

REPO = Path(__file__).resolve().parents[2]


def test_source_is_fixed_and_its_entropy_rate_is_known():
    a, b = data.MarkovSource.build(), data.MarkovSource.build()
    assert np.array_equal(a.successors, b.successors) and np.array_equal(a.probs, b.probs)
    t = a.transition_matrix()
    assert np.allclose(t.sum(axis=1), 1.0)
    assert a.entropy_rate() == pytest.approx(1.1073, abs=1e-4)  # the number the tiny target sits above


def test_documents_are_deterministic_per_seed_and_end_with_eod():
    src = data.MarkovSource.build()
    d1, d2 = src.sample_documents(5000, seed=7), src.sample_documents(5000, seed=7)
    assert len(d1) == len(d2) and all(np.array_equal(x, y) for x, y in zip(d1, d2))
    assert not np.array_equal(
        np.concatenate(d1)[:500], np.concatenate(src.sample_documents(5000, seed=8))[:500]
    )
    assert all(d[-1] == data.EOD and (d[:-1] != data.EOD).all() for d in d1)
    # Each token follows one of its source successors (or starts a document after EOD).
    for d in d1[:20]:
        for s, nxt in zip(d[:-2], d[1:-1]):
            assert nxt in src.successors[s]


def test_empirical_entropy_of_a_long_sample_matches_the_rate():
    src = data.MarkovSource.build()
    toks = np.concatenate(src.sample_documents(200_000, seed=3))
    t = src.transition_matrix()
    nll = -np.log(t[toks[:-1], toks[1:]]).mean()
    assert nll == pytest.approx(src.entropy_rate(), abs=0.02)


def test_indexed_dataset_round_trip(tmp_path):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    docs = data.MarkovSource.build().sample_documents(3000, seed=1)
    data.write_indexed(tmp_path / "shard", docs)
    ds = IndexedDataset(str(tmp_path / "shard"))
    assert len(ds) == len(docs)
    assert all(np.array_equal(ds[i], d) for i, d in enumerate(docs))


def test_generate_tiny_is_byte_identical(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "TRAIN_SEQUENCES", 200)
    cfg = SimpleNamespace(max_sequence_length=64, eval_samples=32, vocab_size=256)
    data.generate_tiny(tmp_path / "a", cfg)
    data.generate_tiny(tmp_path / "b", cfg)
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert len(files) == 6
    assert all(sha256(tmp_path / "a" / f) == sha256(tmp_path / "b" / f) for f in files)
    # The validation shard holds exactly eval_samples sequences (+1 token for the last label).
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    assert sum(len(x) for x in IndexedDataset(str(tmp_path / "a" / data.VALID_PREFIX))) == 32 * 64 + 1


def test_manifest_is_torch_free_and_rejects_empty_or_stale_dirs(tmp_path):
    code = (
        "import sys, benchmarks; benchmarks.get('gpt3').impl.data; "
        "assert 'torch' not in sys.modules and 'megatron' not in sys.modules"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    plan = SimpleNamespace(
        benchmark="gpt3", size="tiny", data_dir=str(tmp_path), config={"max_sequence_length": 64}
    )
    assert not manifest.is_prepared(plan)
    (tmp_path / "x.bin").write_bytes(b"12")
    manifest.write(plan, ["x.bin"])
    assert manifest.is_prepared(plan)
    assert not manifest.is_prepared(SimpleNamespace(**{**vars(plan), "config": {"max_sequence_length": 128}}))
    (tmp_path / "x.bin").write_bytes(b"13")  # same size, other bytes: tiny data is sha256-checked
    assert not manifest.is_prepared(plan)


def test_full_size_names_what_is_missing_and_where_it_comes_from(tmp_path):
    from harness.core.errors import ConfigError
    from reference_impls.megatron_gpt.gpt3 import FULL_DATA as FULL
    from reference_impls.megatron_gpt.prepare import check_full

    with pytest.raises(ConfigError) as e:
        check_full(tmp_path, "gpt3", FULL)
    msg = str(e.value)
    assert "\n" not in msg and "c4_en_6_c4_spm_text_document.bin" in msg and "dataset_c4_spm.tar" in msg
    for p in (*FULL.train_prefixes, FULL.valid_prefix):
        for ext in (".bin", ".idx"):
            (tmp_path / (p + ext)).write_bytes(b"")
    with pytest.raises(ConfigError, match="ckpt4000-consumed_samples=0"):
        check_full(tmp_path, "gpt3", FULL)


def test_tiny_target_in_benchmark_yaml_equals_the_tiny_rules_window():
    from benchmarks.tiny_rules import benchmark_rules

    target = yaml.safe_load((REPO / "benchmarks/gpt3/benchmark.yaml").read_text())["quality"][0]["tiny"]
    rules = [r for r in benchmark_rules("4.1.0", "gpt3", benchmarks.get("gpt3")) if "KEY" in r]
    check = next(r["KEY"]["ATLEAST_ONE_CHECK"] for r in rules if r["KEY"]["NAME"] == "eval_accuracy")
    upper = float(re.search(r"v\['value'\] <= ([0-9.]+)", check).group(1))
    lower = float(re.search(r"v\['value'\] > ([0-9.]+)", check).group(1))
    assert upper == target
    assert lower < data.MarkovSource.build().entropy_rate() < upper
    seq = next(r["KEY"]["CHECK"] for r in rules if r["KEY"]["NAME"] == "max_sequence_length")
    tiny = yaml.safe_load((REPO / "benchmarks/gpt3/configs/tiny.yaml").read_text())["config"]
    assert f"== {tiny['max_sequence_length']}" in seq
