"""Where gpt3's files lie in a data folder (what `prepare` writes or checks, what the loop reads).

Tiny (`prepare` writes it):
    c4_synth_train_00.{bin,idx}, c4_synth_train_01.{bin,idx}, c4_synth_validation.{bin,idx}
    checkpoint/tiny_ckpt.pt        model + Adam state after reference_checkpoint_step steps
    PREPARED.json                  the one manifest shape (harness/core/data_manifest.py), last
Full (the user provides it; nothing can be downloaded here):
    <prefix>.{bin,idx} for the two C4 training prefixes and the validation prefix
    ckpt4000-consumed_samples=0/   the reference checkpoint (megatron dist_checkpointing format)
"""

from __future__ import annotations

from pathlib import Path

CHECKPOINT = "checkpoint/tiny_ckpt.pt"
FULL_CHECKPOINT_DIR = "ckpt4000-consumed_samples=0"

FULL_SOURCES = {
    "data": "the MLCommons preprocessed C4 (`dataset_c4_spm.tar`, see mlcommons/training gpt3 README: "
    "'Preprocessed data download')",
    "checkpoint": "the MLCommons GPT-3 reference checkpoint `ckpt4000-consumed_samples=0` (mlcommons/training "
    "gpt3 README: 'Checkpoint download'), in megatron dist_checkpointing format",
}


def full_files(data_dir: Path) -> list[tuple[Path, str]]:
    """(path, where it comes from) of every file the full-size run reads."""
    from reference_impls.megatron_gpt.data import FULL_TRAIN_PREFIXES, FULL_VALID_PREFIX

    out = [
        (data_dir / (prefix + ext), FULL_SOURCES["data"])
        for prefix in (*FULL_TRAIN_PREFIXES, FULL_VALID_PREFIX)
        for ext in (".bin", ".idx")
    ]
    return out + [(data_dir / FULL_CHECKPOINT_DIR / "metadata.json", FULL_SOURCES["checkpoint"])]
