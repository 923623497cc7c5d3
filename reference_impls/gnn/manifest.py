"""Torch-free check that a plan's GNN data is prepared (so `mlperf run` can prepare on demand cheaply).

`prepare` writes `<data_dir>/PREPARED.json`: the config fields the data depends on, and every file
with its size and sha256. `is_prepared` compares the fields and the file sizes (hashing a 2.2 TB
dataset on every run would be absurd; `prepare` is where contents are checked).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

MANIFEST = "PREPARED.json"
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


def sha256(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def write(plan, files: list[Path], hash_files: bool = True) -> Path:
    root = Path(plan.data_dir)
    entries = {}
    for p in sorted(files):
        rel = str(Path(p).relative_to(root))
        entries[rel] = {
            "bytes": Path(p).stat().st_size,
            **({"sha256": sha256(Path(p))} if hash_files else {}),
        }
    out = root / MANIFEST
    tmp = out.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {"format": FORMAT, "benchmark": "gnn", "fields": data_fields(plan), "files": entries},
            indent=1,
            sort_keys=True,
        )
    )
    tmp.replace(out)
    return out


def read(plan) -> dict | None:
    try:
        return json.loads((Path(plan.data_dir) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def is_prepared(plan) -> bool:
    m = read(plan)
    if not m or m.get("format") != FORMAT or m.get("fields") != json.loads(json.dumps(data_fields(plan))):
        return False
    root = Path(plan.data_dir)
    for rel, info in m.get("files", {}).items():
        p = root / rel
        if not p.is_file() or p.stat().st_size != info.get("bytes"):
            return False
    return True
