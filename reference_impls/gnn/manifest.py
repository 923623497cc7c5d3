"""Torch-free check that a plan's GNN data is prepared (so `mlperf run` can prepare on demand cheaply).

`prepare` writes `<data_dir>/PREPARED.json`: the config fields the data depends on, and every file
with its size (and sha256 at tiny size). `is_prepared` compares the fields, the file sizes and, at
tiny size, every file's sha256 (17 MB: ~25 ms); full data is size-checked only (hashing a 2.2 TB
dataset on every run would be absurd; `prepare` is where contents are checked).
"""

from __future__ import annotations

from pathlib import Path

from harness.core import data_manifest as shared

FORMAT = 1

# Config fields that shape the data on disk (tiny: generated from them; full: checked against them).
DATA_FIELDS = (
    "dataset_size",
    "num_nodes",
    "num_labeled_papers",
    "train_frac",
    "validation_frac",
    "split_seed",
    "in_channels",
    "num_classes",
)
SYNTH_FIELDS = ("synth_edges_per_paper", "synth_homophily", "synth_feature_noise", "synth_seed")


def data_fields(plan) -> dict:
    cfg = plan.config
    keys = DATA_FIELDS + (SYNTH_FIELDS if plan.size == "tiny" else ())
    return {"size": plan.size, **{k: cfg.get(k) for k in keys}}


def write(plan, files: list[Path], hash_files: bool = True) -> Path:
    entries = shared.file_entries(plan.data_dir, files, hash_files=hash_files)
    doc = {"format": FORMAT, "benchmark": "gnn", "fields": data_fields(plan), "files": entries}
    return shared.write(plan.data_dir, doc)


def read(plan) -> dict | None:
    return shared.read(plan.data_dir)


def is_prepared(plan) -> bool:
    expect = {"format": FORMAT, "fields": data_fields(plan)}
    return shared.check(plan.data_dir, expect, verify=plan.size == "tiny") is not None
