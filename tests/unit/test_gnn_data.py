"""GNN data: tiny generation is deterministic and manifested; bad IGBH input is one clear line, exit 2."""

import shutil
import subprocess
import sys

import numpy as np
import pytest
from helpers import make_plan, typed_config

from benchmarks.gnn import DATA as manifest
from harness.core.errors import ConfigError
from harness.core.runplan import RunPlan
from reference_impls.gnn import data, prepare

SMALL = ("num_nodes={paper: 2000, author: 3000, institute: 40, fos: 60}", "num_labeled_papers=2000")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("gnn-small")
    plan = make_plan("gnn", root, seed=1, sets=SMALL, data_dir=root / "data")
    assert not manifest.is_prepared(plan)
    prepare.prepare(plan)
    return plan


def _copy(plan: RunPlan, tmp_path) -> RunPlan:
    """A full-size plan over a private copy of the small dataset (full = validate, never generate)."""
    shutil.copytree(plan.data_dir, tmp_path / "data")
    p = plan.model_copy(update={"size": "full", "data_dir": str(tmp_path / "data"), "run_dir": str(tmp_path)})
    p.save(tmp_path / "plan.json")
    return p


def test_tiny_data_is_manifested_deterministic_and_loads(prepared, tmp_path):
    assert manifest.is_prepared(prepared)
    cfg = typed_config(prepared)
    g = data.load(prepared.data_dir, cfg, in_memory=True)
    assert g.train_idx.numel() == 1200 and g.val_idx.numel() == 100
    assert set(g.csc) == set(data.edge_types(cfg.num_nodes)) and len(g.csc) == 7
    indptr, indices = g.csc[("paper", "cites", "paper")]
    assert indptr[-1] == indices.numel() and int(indices.max()) < 2000
    again = prepared.model_copy(update={"data_dir": str(tmp_path / "again")})
    prepare.prepare(again)
    a, b = manifest.read(prepared)["files"], manifest.read(again)["files"]
    assert a == b  # same sha256 for every file


def test_is_prepared_notices_a_changed_file_or_config(prepared, tmp_path):
    p = _copy(prepared, tmp_path).model_copy(update={"size": "tiny"})
    assert manifest.is_prepared(p)
    other = p.model_copy(update={"config": {**p.config, "synth_homophily": 0.5}})
    assert not manifest.is_prepared(other)
    feat = tmp_path / "data" / "tiny-synth" / "processed" / "fos" / "node_feat.npy"
    feat.write_bytes(feat.read_bytes()[:-4])
    assert not manifest.is_prepared(p)


def _prepare_cli(plan_dir):
    from harness.core.runplan import RunPlan

    plan = RunPlan.load(plan_dir / "plan.json").model_copy(update={"task": "prepare"})
    plan.save(plan_dir / "prepare.plan.json")
    return subprocess.run(
        [sys.executable, "-m", "reference_impls.gnn", "--plan", str(plan_dir / "prepare.plan.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_full_validation_passes_on_good_data(prepared, tmp_path):
    p = _copy(prepared, tmp_path)
    (tmp_path / "data" / "PREPARED.json").unlink()
    data.validate(p.data_dir, typed_config(p))
    r = _prepare_cli(tmp_path)
    assert r.returncode == 0, r.stderr
    assert manifest.is_prepared(p)


def test_missing_feature_file(prepared, tmp_path):
    p = _copy(prepared, tmp_path)
    (tmp_path / "data" / "tiny-synth" / "processed" / "author" / "node_feat.npy").unlink()
    with pytest.raises(
        ConfigError, match=r"author/node_feat.npy: missing feature file for node type 'author'"
    ):
        data.validate(p.data_dir, typed_config(p))
    (tmp_path / "data" / "PREPARED.json").unlink()
    r = _prepare_cli(tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "missing feature file" in lines[0]
    assert "download_igbh_full.sh" in lines[0]


def test_label_file_of_the_wrong_length(prepared, tmp_path):
    p = _copy(prepared, tmp_path)
    label = tmp_path / "data" / "tiny-synth" / "processed" / "paper" / "node_label_19.npy"
    np.save(label, np.zeros(1999, dtype=np.float32))
    with pytest.raises(ConfigError, match=r"label file of the wrong length: 1999 entries, expected 2000"):
        data.validate(p.data_dir, typed_config(p))
    # A headerless raw file (IGBH-Full style) of the wrong length reads the same way.
    label.write_bytes(np.zeros(1500, dtype=np.float32).tobytes())
    with pytest.raises(ConfigError, match=r"1500 entries, expected 2000"):
        data.validate(p.data_dir, typed_config(p))


def test_edge_index_out_of_range(prepared, tmp_path):
    p = _copy(prepared, tmp_path)
    path = tmp_path / "data" / "tiny-synth" / "processed" / "paper__written_by__author" / "edge_index.npy"
    e = np.load(path)
    e[5, 1] = 3000  # authors are 0..2999
    np.save(path, e)
    with pytest.raises(
        ConfigError,
        match=r"edge index out of range: row 5 has author id 3000 in column 1, "
        r"but there are 3000 author nodes",
    ):
        data.validate(p.data_dir, typed_config(p))


def test_training_run_on_missing_data_exits_2_with_one_line(prepared, tmp_path):
    p = _copy(prepared, tmp_path).model_copy(update={"log_path": str(tmp_path / "mlperf.log")})
    p.save(tmp_path / "plan.json")
    shutil.rmtree(tmp_path / "data" / "tiny-synth" / "processed" / "CSC")
    r = subprocess.run(
        [sys.executable, "-m", "reference_impls.gnn", "--plan", str(tmp_path / "plan.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr[-2000:]
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "CSC" in errors[0] and "mlperf prepare gnn" in errors[0]
    assert '"status": "aborted"' in (tmp_path / "mlperf.log").read_text().strip().splitlines()[-1]


def test_headerless_full_style_files_are_memory_mapped_and_gathered(prepared, tmp_path):
    """IGBH-Full's paper features and labels are raw float32: read through np.memmap, never whole."""
    import torch

    p = _copy(prepared, tmp_path)
    base = tmp_path / "data" / "tiny-synth" / "processed"
    feat = np.load(base / "paper" / "node_feat.npy")
    (base / "paper" / "node_feat.npy").write_bytes(feat.astype(np.float32).tobytes())
    labels = np.load(base / "paper" / "node_label_19.npy")
    (base / "paper" / "node_label_19.npy").write_bytes(labels.astype(np.float32).tobytes())
    g = data.load(p.data_dir, typed_config(p), in_memory=False)
    assert isinstance(g.features["paper"], np.memmap) and isinstance(g.labels, np.memmap)
    ids = torch.tensor([1999, 3, 3, 700])
    assert torch.equal(data.gather(g.features["paper"], ids), torch.from_numpy(feat[[1999, 3, 3, 700]]))
    assert data.gather_labels(g.labels, ids).tolist() == labels[[1999, 3, 3, 700]].astype(int).tolist()
    (base / "paper" / "node_feat.npy").write_bytes(feat[:-1].astype(np.float32).tobytes())
    with pytest.raises(ConfigError, match=r"feature file has \d+ values, expected 2000 x 32"):
        data.validate(p.data_dir, typed_config(p), check_ranges=False)
