"""`python -m reference_impls.gnn.prepare --plan PLAN.json`: make the GNN data a plan needs.

Tiny: a deterministic synthetic IGBH-shaped heterograph (paper/author/institute/fos, the 4 base
relations, 19 classes) written in the IGBH layout (see data.py), with planted homophilous labels:
every node has a class; its features are its class centroid plus Gaussian noise
(`synth_feature_noise`), and each edge joins two nodes of the same class with probability
`synth_homophily` (else a uniformly random node). The noise is set so that a paper's own
features are a weak signal (a linear probe on them: 0.34 validation accuracy) while its neighbours'
features, mostly of its class, are a strong one (own + 1-hop mean: 0.95): the real 0.72 target is
reached only through message passing (tests/unit/test_gnn_signal.py) and is kept verbatim. Then the seed split (the reference's split_seeds.py logic) and the CSC arrays.

Full: validate the layout (every file, shapes, label length, every edge id in range, streamed),
write the split if it is missing, build the CSC arrays (untimed one-time preprocessing), and write
the manifest. Any problem is one line: `error: <file>: <what> (<where it comes from>)`, exit 2.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.gnn import DATA
from benchmarks.gnn.config import GnnConfig
from harness.core.runplan import RunPlan
from reference_impls.gnn import data


def _pick(rng, n_src: int, mean: float, cls_src, cls_dst_sorted, dst_offsets, n_dst: int, homophily: float):
    """Edges from every source node (1 + Poisson(mean - 1) each) to a same-class node w.p. homophily."""
    counts = 1 + rng.poisson(max(mean - 1.0, 0.0), size=n_src)
    src = np.repeat(np.arange(n_src, dtype=np.int64), counts)
    c = cls_src[src]
    lo, hi = dst_offsets[c], dst_offsets[c + 1]
    same = rng.random(src.size) < homophily
    has_class = hi > lo
    within = lo + (rng.random(src.size) * np.maximum(hi - lo, 1)).astype(np.int64)
    dst = np.where(
        same & has_class, cls_dst_sorted[np.minimum(within, n_dst - 1)], rng.integers(0, n_dst, size=src.size)
    )
    pairs = np.unique(np.stack([src, dst], axis=1), axis=0)
    return pairs


def generate_tiny(plan: RunPlan) -> list[Path]:
    import torch

    cfg = GnnConfig.model_validate(plan.config)
    base = data.processed_dir(plan.data_dir, cfg)
    rng = np.random.default_rng(cfg.synth_seed)
    n, c, d = cfg.num_nodes, cfg.num_classes, cfg.in_channels
    centroids = rng.normal(size=(c, d)).astype(np.float32)
    classes = {t: rng.integers(0, c, size=n[t]) for t in n}
    files: list[Path] = []
    for t in n:
        x = centroids[classes[t]] + cfg.synth_feature_noise * rng.normal(size=(n[t], d)).astype(np.float32)
        (base / t).mkdir(parents=True, exist_ok=True)
        np.save(base / t / "node_feat.npy", x.astype(np.float32))
        files.append(base / t / "node_feat.npy")
    np.save(base / "paper" / cfg.label_file, classes["paper"].astype(np.float32))
    files.append(base / "paper" / cfg.label_file)

    by_class = {}
    for t in n:
        order = np.argsort(classes[t], kind="stable")
        offsets = np.searchsorted(classes[t][order], np.arange(c + 1))
        by_class[t] = (order.astype(np.int64), offsets)
    for s, r, dt in data.relations(n):
        mean = cfg.synth_edges_per_paper.get(r, 1.0)
        order, offsets = by_class[dt]
        pairs = _pick(rng, n[s], mean, classes[s], order, offsets, n[dt], cfg.synth_homophily)
        if r == "cites":
            pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        out = base / data.etype_dir((s, r, dt))
        out.mkdir(parents=True, exist_ok=True)
        np.save(out / "edge_index.npy", pairs.astype(np.int64))
        files.append(out / "edge_index.npy")

    train_idx, val_idx = data.split_seeds(
        cfg.num_labeled_papers, cfg.train_frac, cfg.validation_frac, cfg.split_seed
    )
    for name, idx in (("train_idx.pt", train_idx), ("val_idx.pt", val_idx)):
        torch.save(idx, base / name)
        files.append(base / name)
    data.validate(plan.data_dir, cfg, check_ranges=True)
    files += data.build_csc(plan.data_dir, cfg)
    return files


def prepare_full(plan: RunPlan) -> list[Path]:
    import torch

    cfg = GnnConfig.model_validate(plan.config)
    base = data.processed_dir(plan.data_dir, cfg)
    # Split first if absent (it only needs the labelled count), then check everything.
    if base.is_dir() and not (base / "train_idx.pt").exists() and not (base / "val_idx.pt").exists():
        train_idx, val_idx = data.split_seeds(
            cfg.num_labeled_papers, cfg.train_frac, cfg.validation_frac, cfg.split_seed
        )
        torch.save(train_idx, base / "train_idx.pt")
        torch.save(val_idx, base / "val_idx.pt")
    data.validate(plan.data_dir, cfg, check_ranges=True)
    files = [base / t / "node_feat.npy" for t in cfg.num_nodes] + [base / "paper" / cfg.label_file]
    files += [base / data.etype_dir(et) / "edge_index.npy" for et in data.relations(cfg.num_nodes)]
    files += [base / "train_idx.pt", base / "val_idx.pt"]
    files += data.build_csc(plan.data_dir, cfg)
    return files


def prepare(plan: RunPlan) -> Path:
    """Generate or validate, then PREPARED.json (sizes only at full size: hashing 2.2 TB is not useful)."""
    files = generate_tiny(plan) if plan.size == "tiny" else prepare_full(plan)
    return DATA.write(plan, files)


def prepare_once(plan: RunPlan) -> None:
    if DATA.is_prepared(plan):
        print(f"gnn ({plan.size}) data already prepared in {plan.data_dir}")
        return
    out = prepare(plan)
    print(f"gnn ({plan.size}) data ready in {plan.data_dir} ({out.name} written)")
