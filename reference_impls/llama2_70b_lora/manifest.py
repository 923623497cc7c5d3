"""Torch-free check whether a plan's data directory is ready (so `run` can prepare on demand).

Tiny: `PREPARED.json` exists, was written for the same data-defining config fields, and every file
it lists is present with its recorded size and sha256 (2 MB: ~3 ms).
Full: the dataset parquet files and the base checkpoint (config.json + *.safetensors) exist (their
contents are checked when a run reads them; hashing 140 GB on every run is not useful).
"""

from __future__ import annotations

from pathlib import Path

from harness.core import data_manifest as shared

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


def write(plan, files: list[Path], facts: dict) -> Path:
    """Tiny only: the full data is the user's, checked by `_full_ready`, never listed."""
    doc = {
        "benchmark": plan.benchmark,
        "size": plan.size,
        "not_submittable": True,
        "config": data_config(plan.config),
        "files": shared.file_entries(plan.data_dir, files),
        **facts,
    }
    return shared.write(plan.data_dir, doc)


def _full_ready(data_dir: Path, config: dict) -> bool:
    ds = data_dir / config.get("dataset_dir", "gov_report")
    md = data_dir / config.get("model_dir", "model")
    return (
        (ds / "train-00000-of-00001.parquet").exists()
        and (ds / "validation-00000-of-00001.parquet").exists()
        and (md / "config.json").exists()
        and any(md.glob("*.safetensors"))
    )


def is_prepared(plan) -> bool:
    """Whether `plan.data_dir` holds what a run of `plan` reads (tiny: sha256-verified)."""
    data_dir = Path(plan.data_dir)
    if plan.size == "full":
        return _full_ready(data_dir, plan.config)
    return shared.check(data_dir, {"config": data_config(plan.config)}, verify=True) is not None
