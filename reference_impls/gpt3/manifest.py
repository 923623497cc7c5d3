"""What a prepared GPT-3 data directory holds, checked without importing torch.

Tiny (`prepare` writes it):
    c4_synth_train_00.{bin,idx}, c4_synth_train_01.{bin,idx}, c4_synth_validation.{bin,idx}
    checkpoint/tiny_ckpt.pt        model + Adam state after reference_checkpoint_step steps
    PREPARED.json                  sha256 + size of every file above, and the config fields the
                                   data and checkpoint depend on (written last, atomically)
Full (the user provides it; nothing can be downloaded here):
    <prefix>.{bin,idx} for the two C4 training prefixes and the validation prefix
    ckpt4000-consumed_samples=0/   the reference checkpoint (megatron dist_checkpointing format)
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

MANIFEST = "PREPARED.json"
CHECKPOINT = "checkpoint/tiny_ckpt.pt"
FULL_CHECKPOINT_DIR = "ckpt4000-consumed_samples=0"
# Bump when the generator or the pretraining recipe changes: old data dirs then re-prepare.
FORMAT = "mlperf-harness/gpt3-tiny/1"

# Config fields the tiny corpus and checkpoint depend on. The run's GBS, base LR and seed don't:
# the checkpoint is pretrained at the reference GBS with prepare.PRETRAIN_LR, whatever the run tunes.
DATA_FIELDS = (
    "max_sequence_length",
    "vocab_size",
    "eval_samples",
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "ffn_hidden_size",
    "init_method_std",
    "dropout",
    "opt_adam_beta_1",
    "opt_adam_beta_2",
    "opt_adam_epsilon",
    "opt_weight_decay",
    "opt_gradient_clip_norm",
    "reference_global_batch_size",
    "reference_warmup_steps",
    "reference_decay_steps",
    "reference_checkpoint_step",
)

FULL_SOURCES = {
    "data": "the MLCommons preprocessed C4 (`dataset_c4_spm.tar`, see mlcommons/training gpt3 README: "
    "'Preprocessed data download')",
    "checkpoint": "the MLCommons GPT-3 reference checkpoint `ckpt4000-consumed_samples=0` (mlcommons/training "
    "gpt3 README: 'Checkpoint download'), in megatron dist_checkpointing format",
}


def data_fields(config: dict) -> dict:
    return {k: config.get(k) for k in DATA_FIELDS}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read(data_dir: str | Path) -> dict | None:
    try:
        return json.loads((Path(data_dir) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def is_prepared(plan, verify_hashes: bool = False) -> bool:
    """True when plan.data_dir holds data for this plan: tiny = a manifest matching the config and
    files of the recorded sizes (sha256 too with verify_hashes); full = the expected layout."""
    data_dir = Path(plan.data_dir)
    if plan.size == "full":
        return not missing_full(data_dir)
    m = read(data_dir)
    if not m or m.get("format") != FORMAT or m.get("config") != data_fields(plan.config):
        return False
    for rel, meta in m.get("files", {}).items():
        p = data_dir / rel
        try:
            if p.stat().st_size != meta["size"]:
                return False
        except OSError:
            return False
        if verify_hashes and sha256(p) != meta["sha256"]:
            return False
    return bool(m.get("files"))


def write(data_dir: Path, files: list[str], config: dict, facts: dict) -> Path:
    entries = {
        rel: {"size": (data_dir / rel).stat().st_size, "sha256": sha256(data_dir / rel)} for rel in files
    }
    doc = {
        "format": FORMAT,
        "benchmark": "gpt3",
        "size": "tiny",
        "config": data_fields(config),
        "files": entries,
        **facts,
    }
    tmp = data_dir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True))
    os.replace(tmp, data_dir / MANIFEST)
    return data_dir / MANIFEST


def missing_full(data_dir: Path) -> list[tuple[str, str]]:
    """(missing path, where it comes from) for the full-size layout; empty when complete."""
    from reference_impls.gpt3.data import FULL_TRAIN_PREFIXES, FULL_VALID_PREFIX

    out = []
    for prefix in (*FULL_TRAIN_PREFIXES, FULL_VALID_PREFIX):
        for ext in (".bin", ".idx"):
            if not (data_dir / (prefix + ext)).is_file():
                out.append((str(data_dir / (prefix + ext)), FULL_SOURCES["data"]))
    ckpt = data_dir / FULL_CHECKPOINT_DIR
    if not (ckpt / "metadata.json").is_file():
        out.append((str(ckpt / "metadata.json"), FULL_SOURCES["checkpoint"]))
    return out
