"""Where the family's files lie in a data folder (what `prepare` writes or checks, what the loop reads).

Tiny (`prepare` writes it):
    c4_synth_train_00.{bin,idx}, c4_synth_train_01.{bin,idx}, c4_synth_validation.{bin,idx}
    checkpoint/tiny_ckpt.pt        the starting checkpoint `prepare` pretrains (gpt3: model + Adam
                                   state; deepseekv3_671b: weights only)
    PREPARED.json                  the one manifest shape (harness/core/data_manifest.py), last
Full (the user provides it; nothing can be downloaded here): the model provider's FULL_DATA, e.g.
gpt3: <prefix>.{bin,idx} for the two C4 training prefixes and the validation prefix, and
    ckpt4000-consumed_samples=0/   the reference checkpoint (megatron dist_checkpointing format)
llama31_8b: the Llama-3.1-tokenized C4 training and validation prefixes, and the tokenizer.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

CHECKPOINT = "checkpoint/tiny_ckpt.pt"
FULL_CHECKPOINT_DIR = "ckpt4000-consumed_samples=0"


@dataclass(frozen=True)
class FullData:
    """A model's full-size data: Megatron indexed datasets (`<prefix>.bin` + `.idx`) and the files
    beside them, each with where it comes from (the one line `prepare --size full` says)."""

    train_prefixes: tuple[str, ...]
    valid_prefix: str
    eod: int
    """The tokenizer's end-of-document id (GPTDataset needs it)."""
    source: str
    """Where the indexed datasets come from."""
    files: tuple[tuple[str, str], ...] = ()
    """(path relative to the data folder, where it comes from) of every other file read."""
    start_dir: str = ""
    """The starting checkpoint's folder (megatron dist_checkpointing) relative to the data
    folder, for a benchmark that starts from one; its metadata.json is among `files`."""


def full_data(config: type) -> FullData:
    """The FULL_DATA of a config class's model provider (a torch-free module attribute)."""
    return importlib.import_module(config.MODEL_PROVIDER).FULL_DATA


def full_files(data_dir: Path, full: FullData) -> list[tuple[Path, str]]:
    """(path, where it comes from) of every file the full-size run reads."""
    out = [
        (data_dir / (prefix + ext), full.source)
        for prefix in (*full.train_prefixes, full.valid_prefix)
        for ext in (".bin", ".idx")
    ]
    return out + [(data_dir / rel, source) for rel, source in full.files]
