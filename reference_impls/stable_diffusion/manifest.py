"""Torch-free check that a plan's Stable Diffusion data is prepared (`mlperf run` prepares on demand).

`prepare` writes `<data_dir>/PREPARED.json`: the config fields the data depends on and every file
with its size (and sha256 at tiny size). `is_prepared` compares the fields, the file sizes and, at
tiny size, every file's sha256 (7 MB: ~11 ms); full data is size-checked only, its contents by `prepare`
(hashing 6.5M latents on every run would be absurd).
"""

from __future__ import annotations

from pathlib import Path

from harness.core import data_manifest as shared

FORMAT = 1

# Config fields that shape the data on disk (tiny: generated from them; full: checked against them).
DATA_FIELDS = (
    "latent_channels",
    "latent_size",
    "text_encoder",
    "text_max_length",
    "train_samples",
    "eval_samples",
    "train_shards",
    "eval_captions",
    "fid_stats",
    "sd_checkpoint",
    "vae_config",
    "clip_text_checkpoint",
    "inception_checkpoint",
    "cross_attention_dim",
)


def data_fields(plan) -> dict:
    cfg = plan.config
    return {"size": plan.size, **{k: cfg.get(k) for k in DATA_FIELDS}}


def write(plan, files: list[Path], hash_files: bool = True, extra: dict | None = None) -> Path:
    entries = shared.file_entries(plan.data_dir, files, hash_files=hash_files)
    doc = {
        "format": FORMAT,
        "benchmark": "stable_diffusion",
        "fields": data_fields(plan),
        "files": entries,
        **(extra or {}),
    }
    return shared.write(plan.data_dir, doc)


def read(plan) -> dict | None:
    return shared.read(plan.data_dir)


def is_prepared(plan) -> bool:
    expect = {"format": FORMAT, "fields": data_fields(plan)}
    return shared.check(plan.data_dir, expect, verify=plan.size == "tiny") is not None
