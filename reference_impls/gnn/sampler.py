"""Uniform heterogeneous neighbour sampling in vectorised PyTorch (no pyg-lib, no torch-sparse).

The graph is one CSC pair (`indptr` over destination nodes, `indices` = source node ids) per edge
type `(src, rel, dst)`. A mini-batch starts from seed papers; hop h takes every node that hop h-1
added, and for each edge type into its node type samples `fan_out[h]` in-neighbours uniformly
without replacement (all of them when the degree is at most that). Sampled neighbours are
relabelled to batch-local ids per node type (seeds first, then in order of discovery), so the
result plugs straight into PyG's `HeteroConv`: `x_dict[t] = features[t][nodes[t]]`,
`edge_index_dict[(s, r, d)] = [local src; local dst]` (messages flow from the sampled neighbours to
the nodes that sampled them). This is what PyG's `NeighborLoader` returns for a heterogeneous
graph (non-disjoint, no trimming); the rules allow a different sampler as long as it passes RCPs.

Vectorisation:
- degree <= k: all edges, expanded with `repeat_interleave` (no Python loop over nodes);
- degree > k: Robert Floyd's algorithm, k vectorised rounds over all such nodes at once; each
  round is O(nodes x k), independent of the degree (a 100k-degree `fos` node costs as much as a
  16-degree one), and yields an exactly uniform k-subset;
- relabelling: one dense `global -> local` table per node type (int64, -1 = absent), filled with
  `torch.unique` per hop and reset only at the touched entries after each batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

EdgeType = tuple[str, str, str]


@dataclass
class SampledBatch:
    """One sampled mini-batch: batch-local graph plus the global ids to gather features with."""

    nodes: dict[str, torch.Tensor]
    """Global node ids per type, in local order (the seeds are nodes[seed_type][:batch_size])."""
    edge_index: dict[EdgeType, torch.Tensor]
    """[2, E] batch-local (src, dst) per edge type (every type present, possibly empty)."""
    batch_size: int
    seed_type: str

    def num_edges(self) -> int:
        return sum(int(e.shape[1]) for e in self.edge_index.values())


def sample_neighbors(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    nodes: torch.Tensor,
    k: int,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample up to k in-neighbours of each node; returns (neighbour ids, position of the node in `nodes`)."""
    start = indptr[nodes]
    deg = indptr[nodes + 1] - start
    pos = torch.arange(nodes.numel(), dtype=torch.long, device=nodes.device)

    # Nodes with degree <= k keep every edge: edge offsets start[i] .. start[i] + deg[i] - 1.
    small = deg <= k
    s_start, s_deg, s_pos = start[small], deg[small], pos[small]
    total = int(s_deg.sum())
    seg = torch.repeat_interleave(torch.arange(s_deg.numel(), device=nodes.device), s_deg, output_size=total)
    first = torch.cumsum(s_deg, 0) - s_deg
    offs_small = s_start[seg] + (torch.arange(total, device=nodes.device) - first[seg])
    dst_small = s_pos[seg]

    # Nodes with degree > k: Floyd's algorithm picks a uniform k-subset of 0..deg-1 in k rounds.
    big = ~small
    b_start, b_deg, b_pos = start[big], deg[big], pos[big]
    n_big = b_deg.numel()
    if n_big:
        sel = torch.empty(n_big, k, dtype=torch.long, device=nodes.device)
        rand = torch.rand(n_big, k, generator=generator, device=nodes.device, dtype=torch.float64)
        for i in range(k):
            j = b_deg - k + i  # choose t uniformly from 0..j
            t = (rand[:, i] * (j + 1).to(torch.float64)).long().clamp_(max=j)
            if i:
                dup = (sel[:, :i] == t.unsqueeze(1)).any(1)
                t = torch.where(dup, j, t)  # t taken already -> take j
            sel[:, i] = t
        offs_big = (b_start.unsqueeze(1) + sel).reshape(-1)
        dst_big = b_pos.repeat_interleave(k)
        offs = torch.cat([offs_small, offs_big])
        dst = torch.cat([dst_small, dst_big])
    else:
        offs, dst = offs_small, dst_small
    return indices[offs].long(), dst


class HeteroNeighborSampler:
    """Multi-hop uniform sampler over per-edge-type CSC arrays (see the module docstring)."""

    def __init__(
        self,
        csc: dict[EdgeType, tuple[torch.Tensor, torch.Tensor]],
        num_nodes: dict[str, int],
        fan_out: list[int],
        generator: torch.Generator | None = None,
    ):
        self.csc = csc
        self.num_nodes = dict(num_nodes)
        self.fan_out = list(fan_out)
        self.generator = generator
        self.edge_types = list(csc)
        # global -> local id per node type; -1 = not in the current batch.
        self.device = next(iter(csc.values()))[0].device if csc else torch.device("cpu")
        self._assoc = {
            t: torch.full((n,), -1, dtype=torch.long, device=self.device) for t, n in self.num_nodes.items()
        }

    def sample(self, seeds: torch.Tensor, seed_type: str = "paper") -> SampledBatch:
        seeds = seeds.long().to(self.device)
        dev = self.device
        nodes: dict[str, list[torch.Tensor]] = {t: [] for t in self.num_nodes}
        count = dict.fromkeys(self.num_nodes, 0)
        rows: dict[EdgeType, list[torch.Tensor]] = {et: [] for et in self.edge_types}
        cols: dict[EdgeType, list[torch.Tensor]] = {et: [] for et in self.edge_types}

        assoc = self._assoc
        assoc[seed_type][seeds] = torch.arange(seeds.numel(), device=dev)
        nodes[seed_type].append(seeds)
        count[seed_type] = seeds.numel()
        frontier = {seed_type: seeds}
        try:
            for k in self.fan_out:
                new: dict[str, list[torch.Tensor]] = {}
                for et in self.edge_types:
                    src_t, _, dst_t = et
                    f = frontier.get(dst_t)
                    if f is None or f.numel() == 0:
                        continue
                    indptr, indices = self.csc[et]
                    nbr, where = sample_neighbors(indptr, indices, f, k, self.generator)
                    if nbr.numel() == 0:
                        continue
                    # Relabel: unseen neighbours get the next local ids of their type.
                    uniq = torch.unique(nbr)
                    fresh = uniq[assoc[src_t][uniq] < 0]
                    if fresh.numel():
                        assoc[src_t][fresh] = torch.arange(
                            count[src_t], count[src_t] + fresh.numel(), device=dev
                        )
                        count[src_t] += fresh.numel()
                        nodes[src_t].append(fresh)
                        new.setdefault(src_t, []).append(fresh)
                    rows[et].append(assoc[src_t][nbr])
                    cols[et].append(assoc[dst_t][f[where]])
                frontier = {t: torch.cat(v) for t, v in new.items()}
        finally:
            out_nodes = {
                t: torch.cat(v) if v else torch.empty(0, dtype=torch.long, device=dev)
                for t, v in nodes.items()
            }
            for t, ids in out_nodes.items():  # reset only what this batch touched
                assoc[t][ids] = -1
        edge_index = {}
        for et in self.edge_types:
            if rows[et]:
                edge_index[et] = torch.stack([torch.cat(rows[et]), torch.cat(cols[et])])
            else:
                edge_index[et] = torch.empty(2, 0, dtype=torch.long, device=dev)
        return SampledBatch(out_nodes, edge_index, seeds.numel(), seed_type)


def sample_per_node(
    csc: dict[EdgeType, tuple[torch.Tensor, torch.Tensor]],
    fan_out: list[int],
    seeds: list[int],
    seed_type: str = "paper",
    rng=None,
) -> SampledBatch:
    """The straightforward version: Python loops over nodes, `random.sample`, dict relabelling.

    Same semantics as `HeteroNeighborSampler` (hops, per-edge-type fan-out, local order), used as
    the correctness reference in the tests and the baseline in bench/bench_gnn_sampler.py.
    """
    import random

    rng = rng or random.Random(0)
    ptr = {et: (p.tolist(), i.tolist()) for et, (p, i) in csc.items()}
    local: dict[str, dict[int, int]] = {}
    order: dict[str, list[int]] = {}
    for et in csc:
        for t in (et[0], et[2]):
            local.setdefault(t, {})
            order.setdefault(t, [])
    for s in seeds:
        local[seed_type][s] = len(order[seed_type])
        order[seed_type].append(s)
    rows = {et: [] for et in csc}
    cols = {et: [] for et in csc}
    frontier = {seed_type: list(seeds)}
    for k in fan_out:
        new: dict[str, list[int]] = {}
        for et in csc:
            src_t, _, dst_t = et
            indptr, indices = ptr[et]
            for v in frontier.get(dst_t, []):
                nbrs = indices[indptr[v] : indptr[v + 1]]
                picked = nbrs if len(nbrs) <= k else [nbrs[i] for i in rng.sample(range(len(nbrs)), k)]
                fresh = sorted({u for u in picked if u not in local[src_t]})
                for u in fresh:
                    local[src_t][u] = len(order[src_t])
                    order[src_t].append(u)
                    new.setdefault(src_t, []).append(u)
                for u in picked:
                    rows[et].append(local[src_t][u])
                    cols[et].append(local[dst_t][v])
        frontier = new
    nodes = {t: torch.tensor(v, dtype=torch.long) for t, v in order.items()}
    edge_index = {et: torch.tensor([rows[et], cols[et]], dtype=torch.long).reshape(2, -1) for et in csc}
    return SampledBatch(nodes, edge_index, len(seeds), seed_type)
