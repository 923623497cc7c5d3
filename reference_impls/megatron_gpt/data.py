"""GPT-3 data: the tiny synthetic corpus (written) and Megatron's GPT datasets (read) at every size.

Tiny corpus: a fixed-seed sparse Markov source over a 256-token vocabulary whose entropy rate is
known exactly, so the tiny target sits at a known distance above the best possible loss.
    token 0      EOD; after EOD the next token is uniform over 1..255 (a new document)
    token s > 0  ends its document with probability 1/MEAN_DOC_LEN, else moves to one of
                 SUCCESSORS fixed successor tokens with fixed Dirichlet(1) probabilities
The chain is irreducible, so its entropy rate H = sum_s pi(s) H(P[s, :]) (pi stationary) is the
floor of the expected per-token cross-entropy of any model on held-out text (about 1.0 nats; a
uniform guess is ln 256 = 5.55). Documents are written as Megatron indexed datasets (`.bin/.idx`,
`megatron.core.datasets.indexed_dataset`): two training shards (blended 0.5/0.5, as C4's files are)
and one validation shard, each from its own stream seed.

Reading goes through `BlendedMegatronDatasetBuilder` + `GPTDataset`, the reference's path: the
training split draws `train_samples_cap` sequences (shuffled by the run seed), the validation split
is one full epoch of the validation shard.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

VOCAB = 256
EOD = 0
SUCCESSORS = 4
MEAN_DOC_LEN = 256
SOURCE_SEED = 20240501
TRAIN_PREFIXES = ("c4_synth_train_00", "c4_synth_train_01")
VALID_PREFIX = "c4_synth_validation"
TRAIN_SEQUENCES = 40_000  # the tiny train_samples_cap; ~12x what a run to the target reads


@dataclass(frozen=True)
class MarkovSource:
    successors: np.ndarray  # [VOCAB, SUCCESSORS] next-token ids (row EOD unused)
    probs: np.ndarray  # [VOCAB, SUCCESSORS] their probabilities (rows sum to 1)

    @classmethod
    def build(cls, seed: int = SOURCE_SEED) -> MarkovSource:
        rng = np.random.default_rng(seed)
        succ = np.stack([rng.choice(np.arange(1, VOCAB), SUCCESSORS, replace=False) for _ in range(VOCAB)])
        probs = rng.dirichlet(np.ones(SUCCESSORS), size=VOCAB)
        return cls(succ, probs)

    def transition_matrix(self) -> np.ndarray:
        p_end = 1.0 / MEAN_DOC_LEN
        t = np.zeros((VOCAB, VOCAB))
        t[EOD, 1:] = 1.0 / (VOCAB - 1)
        for s in range(1, VOCAB):
            np.add.at(t[s], self.successors[s], (1 - p_end) * self.probs[s])
            t[s, EOD] += p_end
        return t

    def entropy_rate(self) -> float:
        """Exact entropy rate of the chain in nats per token."""
        t = self.transition_matrix()
        pi = np.full(VOCAB, 1.0 / VOCAB)
        for _ in range(5000):  # power iteration; the uniform restart makes it mix fast
            nxt = pi @ t
            if np.abs(nxt - pi).sum() < 1e-15:
                break
            pi = nxt
        with np.errstate(divide="ignore", invalid="ignore"):
            h_rows = -np.where(t > 0, t * np.log(t), 0.0).sum(axis=1)
        return float(pi @ h_rows)

    def sample_documents(self, n_tokens: int, seed: int, streams: int = 256) -> list[np.ndarray]:
        """Documents (each ending with EOD) totalling at least n_tokens, from `streams` chains."""
        rng = np.random.default_rng(seed)
        length = math.ceil(n_tokens / streams) + 2 * MEAN_DOC_LEN
        out = np.empty((streams, length), dtype=np.int64)
        state = np.full(streams, EOD)
        cum = np.cumsum(self.probs, axis=1)
        for i in range(length):
            u = rng.random(streams)
            start = rng.integers(1, VOCAB, streams)
            pick = (u[:, None] > cum[state]).sum(axis=1).clip(max=SUCCESSORS - 1)
            moved = self.successors[state, pick]
            end = rng.random(streams) < 1.0 / MEAN_DOC_LEN
            state = np.where(state == EOD, start, np.where(end, EOD, moved))
            out[:, i] = state
        docs: list[np.ndarray] = []
        total = 0
        for row in out:
            ends = np.flatnonzero(row == EOD)
            begin = 0
            for e in ends:  # complete documents only; a stream's trailing fragment is dropped
                docs.append(row[begin : e + 1])
                total += e + 1 - begin
                begin = e + 1
                if total >= n_tokens:
                    return docs
        return docs


def write_indexed(prefix: Path, docs: list[np.ndarray]) -> None:
    """One Megatron indexed dataset (`prefix.bin` + `prefix.idx`), one document per entry."""
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder, get_bin_path, get_idx_path

    builder = IndexedDatasetBuilder(get_bin_path(str(prefix)), dtype=np.uint16)
    for d in docs:
        builder.add_document(d, [len(d)])
    builder.finalize(get_idx_path(str(prefix)))


def tiny_shard_tokens(cfg) -> dict[str, int]:
    """Tokens per shard: the two training shards together hold TRAIN_SEQUENCES sequences (a run
    that needs more goes round another shuffled epoch, as megatron does), the validation shard
    exactly `eval_samples` sequences (+1 token for the last label)."""
    seq = cfg.max_sequence_length
    return {
        "train": math.ceil(TRAIN_SEQUENCES * seq / len(TRAIN_PREFIXES)),
        "valid": cfg.eval_samples * seq + 1,
    }


def generate_tiny(data_dir: Path, cfg) -> dict:
    """Write the tiny corpus into data_dir; return facts for the manifest."""
    data_dir.mkdir(parents=True, exist_ok=True)
    src = MarkovSource.build()
    sizes = tiny_shard_tokens(cfg)
    for i, prefix in enumerate(TRAIN_PREFIXES):
        write_indexed(data_dir / prefix, src.sample_documents(sizes["train"], seed=SOURCE_SEED + 1 + i))
    write_indexed(
        data_dir / VALID_PREFIX, _trim(src.sample_documents(sizes["valid"], SOURCE_SEED + 99), sizes["valid"])
    )
    return {
        "entropy_rate_nats": src.entropy_rate(),
        "vocab_size": VOCAB,
        "eod": EOD,
        "train_prefixes": list(TRAIN_PREFIXES),
        "valid_prefix": VALID_PREFIX,
    }


def _trim(docs: list[np.ndarray], n_tokens: int) -> list[np.ndarray]:
    """Cut the last document so the shard holds exactly n_tokens (eval = whole sequences)."""
    out, total = [], 0
    for d in docs:
        take = min(len(d), n_tokens - total)
        out.append(d[:take])
        total += take
        if total >= n_tokens:
            break
    return out


class _Tokenizer:
    """The only tokenizer facts GPTDataset needs for pre-tokenized data (no pad: megatron uses -1)."""

    def __init__(self, vocab_size: int, eod: int):
        self.vocab_size, self.eod = vocab_size, eod
        # Part of the datasets' cache key (megatron hashes the config's description).
        self.unique_identifiers = {"class": "synthetic-pretokenized", "vocab_size": vocab_size, "eod": eod}

    @property
    def pad(self):
        raise NotImplementedError


def build_datasets(data_dir: Path, cfg, size: str, seed: int, cache_dir: Path | None = None):
    """(train, valid) GPTDatasets: train blends the training shards evenly (tiny and gpt3: two,
    0.5/0.5; llama31_8b: one), valid is one full epoch."""
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    from reference_impls.megatron_gpt.datafiles import full_data

    full = full_data(type(cfg))  # the model's C4 files at full size (its tokenizer's)
    train_prefixes = TRAIN_PREFIXES if size == "tiny" else full.train_prefixes
    valid_prefix = VALID_PREFIX if size == "tiny" else full.valid_prefix
    eod = EOD if size == "tiny" else full.eod
    blend = [1.0 / len(train_prefixes)] * len(train_prefixes)
    config = GPTDatasetConfig(
        random_seed=seed,
        sequence_length=cfg.max_sequence_length,
        blend_per_split=[
            ([str(data_dir / p) for p in train_prefixes], blend),
            ([str(data_dir / valid_prefix)], None),
            None,
        ],
        tokenizer=_Tokenizer(cfg.vocab_size, eod),
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
        create_attention_mask=False,
        path_to_cache=str(cache_dir) if cache_dir else None,
        mid_level_dataset_surplus=0.005,
    )
    logging.getLogger("megatron.core.datasets").setLevel(logging.ERROR)  # index-cache chatter
    train, valid, _ = BlendedMegatronDatasetBuilder(
        GPTDataset, [cfg.train_samples_cap, None, None], lambda: True, config
    ).build()
    return train, valid


def batches(dataset, start: int, count: int, batch_size: int):
    """`count` batches of `batch_size` consecutive samples from index `start` (dicts of [B, S])."""
    import torch

    for b in range(count):
        items = [dataset[start + b * batch_size + i] for i in range(batch_size)]
        yield {
            k: torch.stack([it[k] for it in items]) for k in ("tokens", "labels", "loss_mask", "position_ids")
        }
