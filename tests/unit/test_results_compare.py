"""Ingest (atomic per-round snapshots), compare and plot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.core.errors import ConfigError
from harness.review.results.compare import compare
from harness.review.results.ingest import ingest, load

V40 = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "mlperf_v4.0"
if not V40.exists():
    V40 = Path("/work/shared/fixtures/mlperf_v4.0")
pytestmark = pytest.mark.skipif(not V40.exists(), reason="v4.0 fixtures not available")


def test_ingest_replaces_a_round_atomically(tmp_path):
    db = tmp_path / "db"
    a = ingest(str(V40), "v4.0", str(db))
    assert a["results"] == 5 and a["runs"] == 43 and a["scored"] == 5
    first = os.path.realpath(db / "v4.0")
    ingest(str(V40), "4.0", str(db))
    assert os.path.realpath(db / "v4.0") != first and not os.path.exists(first)
    assert sorted(os.listdir(db))[-1] == "v4.0" and len(os.listdir(db)) == 2  # link + one snapshot
    df = load(str(db))
    assert len(df) == 5 and set(df["round"]) == {"v4.0"}
    assert len(load(str(db), table="runs")) == 43
    with pytest.raises(ConfigError):
        load(str(db), ["v3.1"])


def test_compare_and_plot(tmp_path):
    db = tmp_path / "db"
    ingest(str(V40), "v4.0", str(db))
    df = load(str(db))
    older = df.copy()
    older["round"] = "v3.1"
    older["score_min"] = older["score_min"] * 2
    both = __import__("pandas").concat([older, df], ignore_index=True)
    doc = compare(both, "llama2_70b_lora", accelerator="H100")
    assert [r["round"] for r in doc["rounds"]] == ["v3.1", "v4.0"]
    v40 = doc["rounds"][1]
    assert v40["best_score_min"] == pytest.approx(5.252158024691357)
    assert v40["speedup_best"] == pytest.approx(2.0) and v40["matched_scale"] == 64
    assert v40["best_per_accelerator"] == pytest.approx(5.252158024691357 * 64)
    with pytest.raises(ConfigError):
        compare(both, "gpt3", accelerator="TPU")
    from harness.review.results.plot import plot

    out = plot(both, "llama2_70b_lora", str(tmp_path / "p.png"))
    assert os.path.getsize(out) > 10_000
