"""Torch-free check that a plan's Stable Diffusion data is prepared (`mlperf run` prepares on demand).

`prepare` writes `<data_dir>/PREPARED.json`: the config fields the data depends on and every file
with its size (and sha256 at tiny size). `is_prepared` compares the fields and the file sizes;
contents are checked by `prepare` (hashing 6.5M latents on every run would be absurd).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

MANIFEST = "PREPARED.json"
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
    "clip_text_checkpoint",
    "inception_checkpoint",
    "cross_attention_dim",
)


def data_fields(plan) -> dict:
    cfg = plan.config
    return {"size": plan.size, **{k: cfg.get(k) for k in DATA_FIELDS}}


def sha256(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def write(plan, files: list[Path], hash_files: bool = True, extra: dict | None = None) -> Path:
    root = Path(plan.data_dir)
    entries = {}
    for p in sorted(set(files)):
        entries[str(Path(p).relative_to(root))] = {
            "bytes": Path(p).stat().st_size,
            **({"sha256": sha256(Path(p))} if hash_files else {}),
        }
    out = root / MANIFEST
    tmp = out.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {
                "format": FORMAT,
                "benchmark": "stable_diffusion",
                "fields": data_fields(plan),
                "files": entries,
                **(extra or {}),
            },
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
