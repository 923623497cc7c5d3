"""Torch-free check whether a plan's data directory is ready (so `run` can prepare on demand).

Tiny: `PREPARED.json` exists, was written for the same data-defining config fields, and every file
it lists is present with its recorded size (sha256 is recorded too; `verify` re-hashes).
Full: the dataset parquet files and the base checkpoint (config.json + *.safetensors) exist.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

MANIFEST = "PREPARED.json"
GENERATOR_VERSION = 1
# Config fields the tiny data and the tiny base checkpoint depend on.
DATA_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "max_sequence_length",
    "rope_theta",
    "rms_norm_eps",
    "train_samples",
    "eval_samples",
    "tiny_pretrain_steps",
    "tiny_num_topics",
    "tiny_summary_length",
    "tiny_summary_noise",
    "dataset_dir",
    "model_dir",
)


def data_config(config: dict) -> dict:
    return {k: config.get(k) for k in DATA_FIELDS} | {"generator_version": GENERATOR_VERSION}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _full_ready(data_dir: Path, config: dict) -> bool:
    ds = data_dir / config.get("dataset_dir", "gov_report")
    md = data_dir / config.get("model_dir", "model")
    return (
        (ds / "train-00000-of-00001.parquet").exists()
        and (ds / "validation-00000-of-00001.parquet").exists()
        and (md / "config.json").exists()
        and any(md.glob("*.safetensors"))
    )


def is_prepared(plan, verify: bool = False) -> bool:
    """Whether `plan.data_dir` holds what a run of `plan` reads (cheap unless verify=True)."""
    data_dir = Path(plan.data_dir)
    if plan.size == "full":
        return _full_ready(data_dir, plan.config)
    try:
        m = json.loads((data_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    if m.get("config") != data_config(plan.config):
        return False
    for rel, info in m.get("files", {}).items():
        f = data_dir / rel
        if not f.exists() or f.stat().st_size != info["bytes"]:
            return False
        if verify and sha256(f) != info["sha256"]:
            return False
    return True
