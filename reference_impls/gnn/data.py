"""IGBH on disk: the reference layout, validated with one-line errors, read through memory maps.

    <data_dir>/<dataset_size>/processed/
        <ntype>/node_feat.npy                    [N_t, in_channels] float32 (or float16)
        paper/node_label_2K.npy | node_label_19.npy   one label per paper
        <src>__<rel>__<dst>/edge_index.npy       [E, 2] (src id, dst id)
        train_idx.pt, val_idx.pt                 seed papers (the reference's split_seeds.py)
        CSC/<src>__<rel>__<dst>/indptr.npy, indices.npy   built by `prepare` (untimed, allowed:
                                                 "graph caching"), one per edge type incl. rev_*
The base relations are paper-cites-paper, paper-written_by-author, author-affiliated_to-institute,
paper-topic-fos (+ paper-published-journal and paper-venue-conference when those node types
exist). As in the reference loader, `cites` is made symmetric with self loops and every other
relation gets a `rev_` twin, so messages reach papers from every node type.

IGBH-Full's paper/author feature files and label file are raw float32 without an .npy header (the
reference opens them with np.memmap and a known shape); both forms are accepted here. Nothing is
read whole: features stay memory-mapped and only the rows of each mini-batch are gathered.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchmarks.gnn.config import IGBH_RELATIONS
from harness.core.errors import ConfigError

if TYPE_CHECKING:  # torch is imported inside the functions that use it
    import torch

BASE_RELATIONS = IGBH_RELATIONS
WHERE_FROM = (
    "IGBH-Full comes from the reference's download_igbh_full.sh (s3://igb-public, ~2.2 TB); "
    "tiny data from `mlperf prepare gnn --size tiny`"
)
_NPY_MAGIC = b"\x93NUMPY"


def relations(node_types) -> list[tuple[str, str, str]]:
    return [r for r in BASE_RELATIONS if r[0] in node_types and r[2] in node_types]


def edge_types(node_types) -> list[tuple[str, str, str]]:
    """Edge types the model sees: the base relations and their rev_ twins (cites is symmetric)."""
    out = []
    for s, r, d in relations(node_types):
        out.append((s, r, d))
        if r != "cites":
            out.append((d, f"rev_{r}", s))
    return out


def etype_dir(et) -> str:
    return "__".join(et)


def processed_dir(data_dir, cfg) -> Path:
    return Path(data_dir) / cfg.dataset_size / "processed"


def open_array(path: Path, what: str, dtype=np.float32, shape: tuple | None = None, hint: str = WHERE_FROM):
    """np.load(mmap) for .npy files; raw memmap of `shape` for headerless files (IGBH-Full)."""
    if not path.is_file():
        raise ConfigError(f"{path}: missing {what} ({hint})")
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic == _NPY_MAGIC:
        try:
            return np.load(path, mmap_mode="r")
        except ValueError as e:
            raise ConfigError(f"{path}: unreadable {what} ({e})") from None
    itemsize = np.dtype(dtype).itemsize
    size = path.stat().st_size
    if shape is None or size % itemsize:
        raise ConfigError(f"{path}: {what} is neither an .npy file nor raw {np.dtype(dtype).name} data")
    n = size // itemsize
    want = int(np.prod(shape))
    if n != want:
        return np.memmap(path, dtype=dtype, mode="r", shape=(n,))  # the caller reports the length
    return np.memmap(path, dtype=dtype, mode="r", shape=tuple(shape))


def _features(base: Path, t: str, cfg):
    n, d = cfg.num_nodes[t], cfg.in_channels
    arr = open_array(base / t / "node_feat.npy", f"feature file for node type '{t}'", np.float32, (n, d))
    if arr.ndim == 1:
        raise ConfigError(
            f"{base / t / 'node_feat.npy'}: feature file has {arr.shape[0]} values, expected "
            f"{n} x {d} (num_nodes[{t}] x in_channels)"
        )
    if tuple(arr.shape) != (n, d):
        raise ConfigError(
            f"{base / t / 'node_feat.npy'}: feature file has shape {tuple(arr.shape)}, expected "
            f"({n}, {d}) (num_nodes[{t}], in_channels)"
        )
    return arr


def _labels(base: Path, cfg):
    n = cfg.num_nodes["paper"]
    path = base / "paper" / cfg.label_file
    arr = open_array(path, f"label file for {cfg.num_classes} classes", np.float32, (n,))
    if arr.ndim != 1 or arr.shape[0] != n:
        got = arr.shape[0] if arr.ndim == 1 else f"shape {tuple(arr.shape)}"
        raise ConfigError(
            f"{path}: label file of the wrong length: {got} entries, expected {n} (one per paper)"
        )
    return arr


def _edge_index(base: Path, et, cfg, check_ranges: bool, chunk: int = 1 << 24):
    path = base / etype_dir(et) / "edge_index.npy"
    arr = open_array(path, f"edge index of relation {etype_dir(et)}")
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ConfigError(
            f"{path}: edge index has shape {tuple(arr.shape)}, expected (E, 2) rows of (src, dst)"
        )
    if check_ranges:
        for col, t in ((0, et[0]), (1, et[2])):
            n = cfg.num_nodes[t]
            for lo in range(0, arr.shape[0], chunk):  # streamed: IGBH-Full cites has ~1.8e9 rows
                part = np.asarray(arr[lo : lo + chunk, col])
                bad = np.flatnonzero((part < 0) | (part >= n))
                if bad.size:
                    row = lo + int(bad[0])
                    raise ConfigError(
                        f"{path}: edge index out of range: row {row} has {t} id {int(part[bad[0]])} "
                        f"in column {col}, but there are {n} {t} nodes (ids 0..{n - 1})"
                    )
    return arr


def validate(data_dir, cfg, check_ranges: bool = True) -> dict:
    """Check the whole layout; raise ConfigError naming the first bad file. Returns the open arrays."""
    base = processed_dir(data_dir, cfg)
    if not base.is_dir():
        raise ConfigError(f"{base}: no IGBH '{cfg.dataset_size}' dataset here ({WHERE_FROM})")
    out = {
        "features": {t: _features(base, t, cfg) for t in cfg.num_nodes},
        "labels": _labels(base, cfg),
        "edges": {et: _edge_index(base, et, cfg, check_ranges) for et in relations(cfg.num_nodes)},
    }
    for name in ("train_idx.pt", "val_idx.pt"):
        if not (base / name).is_file():
            raise ConfigError(
                f"{base / name}: missing seed split (run `mlperf prepare gnn`, which applies the "
                f"reference's split_seeds.py logic)"
            )
    return out


def to_csc(src: np.ndarray, dst: np.ndarray, num_dst: int) -> tuple[np.ndarray, np.ndarray]:
    """COO -> CSC over the destination: (indptr [num_dst+1], indices = sources sorted by dst)."""
    order = np.argsort(dst, kind="stable")
    indices = np.ascontiguousarray(src[order]).astype(np.int64)
    indptr = np.zeros(num_dst + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_dst), out=indptr[1:])
    return indptr, indices


def build_csc(data_dir, cfg) -> list[Path]:
    """Write CSC/<etype>/{indptr,indices}.npy for every edge type the model uses; return the files."""
    base = processed_dir(data_dir, cfg)
    written = []
    for s, r, d in relations(cfg.num_nodes):
        e = np.load(base / etype_dir((s, r, d)) / "edge_index.npy", mmap_mode="r")
        src, dst = np.asarray(e[:, 0], dtype=np.int64), np.asarray(e[:, 1], dtype=np.int64)
        if r == "cites":  # the reference: remove self loops, add one per paper, both directions
            keep = src != dst
            loops = np.arange(cfg.num_nodes["paper"], dtype=np.int64)
            src, dst = (
                np.concatenate([src[keep], dst[keep], loops]),
                np.concatenate([dst[keep], src[keep], loops]),
            )
            pairs = [((s, r, d), src, dst)]
        else:
            pairs = [((s, r, d), src, dst), ((d, f"rev_{r}", s), dst, src)]
        for et, a, b in pairs:
            indptr, indices = to_csc(a, b, cfg.num_nodes[et[2]])
            out = base / "CSC" / etype_dir(et)
            out.mkdir(parents=True, exist_ok=True)
            for name, arr in (("indptr.npy", indptr), ("indices.npy", indices)):
                np.save(out / name, arr)
                written.append(out / name)
    return written


@dataclass
class Graph:
    features: dict
    """Per node type: a memory-mapped [N, D] array (or an in-memory torch tensor)."""
    labels: object
    csc: dict
    """(indptr, indices) torch int64 tensors per edge type."""
    train_idx: torch.Tensor
    """Seed papers of the training split (int64)."""
    val_idx: torch.Tensor
    """Seed papers of the validation split (int64)."""
    num_nodes: dict


def load(data_dir, cfg, in_memory: bool = False) -> Graph:
    """Open the prepared dataset for training (cheap checks only; `prepare` did the full scan)."""
    import torch

    base = processed_dir(data_dir, cfg)
    arrays = validate(data_dir, cfg, check_ranges=False)
    csc = {}
    for et in edge_types(cfg.num_nodes):
        d = base / "CSC" / etype_dir(et)
        indptr = open_array(d / "indptr.npy", f"CSC of {etype_dir(et)}", hint="run `mlperf prepare gnn`")
        indices = open_array(d / "indices.npy", f"CSC of {etype_dir(et)}", hint="run `mlperf prepare gnn`")
        if indptr.shape[0] != cfg.num_nodes[et[2]] + 1:
            raise ConfigError(
                f"{d / 'indptr.npy'}: {indptr.shape[0]} entries, expected num_nodes[{et[2]}] + 1 = "
                f"{cfg.num_nodes[et[2]] + 1} (re-run `mlperf prepare gnn`)"
            )
        csc[et] = (_tensor(indptr, in_memory), _tensor(indices, in_memory))
    feats = arrays["features"]
    if in_memory:  # fp8_features: the store itself is FP8 (NVIDIA converts its features offline)
        dtype = torch.float8_e4m3fn if cfg.fp8_features else torch.float32
        feats = {t: torch.from_numpy(np.array(a, dtype=np.float32)).to(dtype) for t, a in feats.items()}
    labels = arrays["labels"]
    labels = (
        torch.from_numpy(np.asarray(labels[: cfg.num_labeled_papers]).astype(np.int64))
        if in_memory
        else labels
    )
    train_idx = torch.load(base / "train_idx.pt")
    val_idx = torch.load(base / "val_idx.pt")
    for name, idx, want in (
        ("train_idx.pt", train_idx, cfg.num_train_seeds),
        ("val_idx.pt", val_idx, cfg.num_val_seeds),
    ):
        if idx.numel() != want:
            raise ConfigError(
                f"{base / name}: {idx.numel()} seeds, expected {want} (num_labeled_papers x "
                f"{'train_frac' if name.startswith('train') else 'validation_frac'})"
            )
    return Graph(feats, labels, csc, train_idx.long(), val_idx.long(), dict(cfg.num_nodes))


def _tensor(arr, in_memory: bool):
    """int64 torch view of a memory map (read-only; the sampler never writes) or an in-memory copy."""
    import warnings

    import torch

    if in_memory:
        return torch.from_numpy(np.array(arr, dtype=np.int64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "non-writable array": we only read it
        return torch.from_numpy(arr)


def gather(features, ids):
    """Rows `ids` (a torch int64 tensor) of an in-memory tensor (in its dtype: float32 or FP8) or of a
    memory-mapped array (as float32 torch)."""
    import torch

    if isinstance(features, torch.Tensor):
        return features.index_select(0, ids)
    idx = ids.numpy()
    order = np.argsort(idx)  # sorted reads are kinder to the page cache
    rows = np.empty((idx.size, features.shape[1]), dtype=features.dtype)
    rows[order] = features[idx[order]]
    return torch.from_numpy(rows).float()


def gather_labels(labels, ids):
    import torch

    if isinstance(labels, torch.Tensor):
        return labels.index_select(0, ids)
    idx = ids.numpy()
    return torch.from_numpy(np.asarray(labels[idx]).astype(np.int64))


def split_seeds(num_labeled: int, train_frac: float, validation_frac: float, seed: int):
    """The reference's split_seeds.py: randperm with torch.manual_seed(seed); 60 % train, then val."""
    import torch

    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(num_labeled, generator=g)
    n_train, n_val = int(num_labeled * train_frac), int(num_labeled * validation_frac)
    return perm[:n_train].clone(), perm[n_train : n_train + n_val].clone()
