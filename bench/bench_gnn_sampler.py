"""GNN sampler benchmark: the vectorised sampler against a per-node Python sampler, and the sampling
share of a tiny training step.

    python bench/bench_gnn_sampler.py [--data-dir DIR] [--batches 20] [--steps 8] [--threads 1]

Prepares the tiny graph (cpu-local tiny config) if needed. Reports per-batch CPU time (process
time, so a loaded machine distorts it less than wall time) for both samplers on the same seed
batches (micro-batch 128, fan-out 15,10,5), their ratio, and for a few real training micro-steps
(sample + gather + forward + backward + Adam) the share of the step spent sampling and gathering.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import benchmarks


def _typed(plan):
    return benchmarks.get(plan.benchmark).typed(plan.config)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None, help="tiny gnn data (default: a temporary folder)")
    ap.add_argument("--batches", type=int, default=20, help="seed batches for the vectorised sampler")
    ap.add_argument("--ref-batches", type=int, default=3, help="seed batches for the per-node sampler (slow)")
    ap.add_argument("--steps", type=int, default=8, help="training micro-steps for the step split")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    import random

    import torch
    import torch.nn.functional as F

    from harness.run.execute import make_plans
    from reference_impls.gnn import data, manifest, prepare
    from reference_impls.gnn.model import RGAT
    from reference_impls.gnn.sampler import HeteroNeighborSampler, sample_per_node

    torch.set_num_threads(args.threads)
    tmp = tempfile.mkdtemp(prefix="bench-gnn-")
    plan = make_plans(
        benchmarks.get("gnn"),
        "cpu-local",
        size="tiny",
        seed=0,
        results_dir=tmp,
        data_dir=args.data_dir or Path(tmp) / "data",
    )[0]
    if not manifest.is_prepared(plan):
        prepare.prepare(plan)
    cfg = _typed(plan)
    g = data.load(plan.data_dir, cfg, in_memory=True)
    mbs = plan.layout.micro_batch_size
    seeds = [g.train_idx[i * mbs : (i + 1) * mbs] for i in range(max(args.batches, args.ref_batches))]

    sampler = HeteroNeighborSampler(g.csc, g.num_nodes, cfg.fan_out, torch.Generator().manual_seed(0))
    sampler.sample(seeds[0])  # warm-up
    vec, edges = [], []
    for s in seeds[: args.batches]:
        c = time.process_time()
        b = sampler.sample(s)
        vec.append(time.process_time() - c)
        edges.append(b.num_edges())
    ref = []
    rng = random.Random(0)
    for s in seeds[: args.ref_batches]:
        c = time.process_time()
        sample_per_node(g.csc, cfg.fan_out, s.tolist(), rng=rng)
        ref.append(time.process_time() - c)

    model = RGAT.from_config(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.opt_base_learning_rate)
    wait, total = [], []
    for i in range(args.steps + 1):
        c0 = time.process_time()
        b = sampler.sample(seeds[i % len(seeds)])
        xs = {t: data.gather(g.features[t], ids) for t, ids in b.nodes.items()}
        y = data.gather_labels(g.labels, b.nodes["paper"][: b.batch_size])
        c1 = time.process_time()
        loss = F.cross_entropy(model(xs, b.edge_index, b.batch_size), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        c2 = time.process_time()
        if i:  # the first step builds lazy state
            wait.append(c1 - c0)
            total.append(c2 - c0)

    out = {
        "micro_batch": mbs,
        "fan_out": cfg.fan_out,
        "edges_per_batch": round(statistics.mean(edges)),
        "vectorised_s_per_batch": round(statistics.median(vec), 4),
        "per_node_s_per_batch": round(statistics.median(ref), 4),
        "speedup_vectorised_vs_per_node": round(statistics.median(ref) / statistics.median(vec), 1),
        "step_cpu_s": round(statistics.median(total), 4),
        "sampling_share_of_step": round(sum(wait) / sum(total), 3),
    }
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:32s} {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
