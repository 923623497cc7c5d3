"""What a prepared GPT-3 data directory holds, checked without importing torch.

Tiny (`prepare` writes it):
    c4_synth_train_00.{bin,idx}, c4_synth_train_01.{bin,idx}, c4_synth_validation.{bin,idx}
    checkpoint/tiny_ckpt.pt        model + Adam state after reference_checkpoint_step steps
    PREPARED.json                  sha256 + size of every file above, and the config fields the
                                   data and checkpoint depend on (written last, atomically);
                                   `is_prepared` re-hashes every file
Full (the user provides it; nothing can be downloaded here):
    <prefix>.{bin,idx} for the two C4 training prefixes and the validation prefix
    ckpt4000-consumed_samples=0/   the reference checkpoint (megatron dist_checkpointing format)
"""

from __future__ import annotations

from pathlib import Path

from harness.core import data_manifest as shared
from harness.core.data_manifest import MANIFEST, sha256  # noqa: F401  (prepare and tests use them from here)

CHECKPOINT = "checkpoint/tiny_ckpt.pt"
FULL_CHECKPOINT_DIR = "ckpt4000-consumed_samples=0"
# Bump when the generator or the pretraining recipe changes: old data dirs then re-prepare.
FORMAT = "mlperf-harness/gpt3-tiny/1"

# Config fields the tiny corpus and checkpoint depend on. The run's GBS, base LR and seed don't:
# the checkpoint is pretrained at the reference GBS with prepare.PRETRAIN_LR, whatever the run tunes.
DATA_FIELDS = (
    "max_sequence_length",
    "vocab_size",
    "make_vocab_size_divisible_by",
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


def read(data_dir: str | Path) -> dict | None:
    return shared.read(data_dir)


def is_prepared(plan) -> bool:
    """True when plan.data_dir holds data for this plan: tiny = a manifest matching the config and
    files of the recorded sizes and sha256 (7 MB: ~10 ms; a same-size corruption must not
    train); full = the expected layout (present, not hashed: ~1 TB)."""
    if plan.size == "full":
        return not missing_full(Path(plan.data_dir))
    expect = {"format": FORMAT, "config": data_fields(plan.config)}
    m = shared.check(plan.data_dir, expect, size_key="size", verify=True)
    return bool(m and m.get("files"))  # a manifest that lists nothing proves nothing


def write(data_dir: Path, files: list[str], config: dict, facts: dict) -> Path:
    doc = {
        "format": FORMAT,
        "benchmark": "gpt3",
        "size": "tiny",
        "config": data_fields(config),
        "files": shared.file_entries(data_dir, files, size_key="size"),
        **facts,
    }
    return shared.write(data_dir, doc)


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
