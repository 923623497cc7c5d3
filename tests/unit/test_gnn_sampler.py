"""The vectorised heterogeneous neighbour sampler against the per-node Python reference."""

import random
from collections import Counter

import numpy as np
import pytest
import torch

from reference_impls.gnn.data import to_csc
from reference_impls.gnn.sampler import HeteroNeighborSampler, sample_neighbors, sample_per_node

NUM = {"paper": 60, "author": 40, "fos": 7}


def _graph(seed=0):
    """A small random heterograph: paper-cites-paper, author->paper, fos->paper, paper->author."""
    rng = np.random.default_rng(seed)
    csc = {}
    for et, n_e in (
        (("paper", "cites", "paper"), 300),
        (("author", "rev_written_by", "paper"), 150),
        (("fos", "rev_topic", "paper"), 120),
        (("paper", "written_by", "author"), 150),
    ):
        src = rng.integers(0, NUM[et[0]], n_e)
        dst = rng.integers(0, NUM[et[2]], n_e)
        pairs = np.unique(np.stack([src, dst], 1), axis=0)
        indptr, indices = to_csc(pairs[:, 0], pairs[:, 1], NUM[et[2]])
        csc[et] = (torch.from_numpy(indptr), torch.from_numpy(indices))
    return csc


def _global_edges(batch):
    """{etype: set of (global src, global dst)} of a sampled batch."""
    out = {}
    for (s, r, d), ei in batch.edge_index.items():
        src = batch.nodes[s][ei[0]].tolist()
        dst = batch.nodes[d][ei[1]].tolist()
        out[(s, r, d)] = set(zip(src, dst))
    return out


def test_full_fan_out_equals_the_per_node_reference_exactly():
    csc = _graph()
    fan = [100, 100, 100]  # above every degree: sampling is deterministic, the two must agree
    seeds = [3, 17, 42, 5]
    vec = HeteroNeighborSampler(csc, NUM, fan).sample(torch.tensor(seeds))
    ref = sample_per_node(csc, fan, seeds)
    assert _global_edges(vec) == _global_edges(ref)
    for t in NUM:
        assert sorted(vec.nodes[t].tolist()) == sorted(ref.nodes[t].tolist())
        assert len(set(vec.nodes[t].tolist())) == vec.nodes[t].numel()  # each node once
    assert vec.nodes["paper"][:4].tolist() == seeds  # seeds first, in order


def test_sampled_edges_exist_without_repeats_and_respect_the_fan_out():
    csc = _graph(1)
    k = 3
    batch = HeteroNeighborSampler(csc, NUM, [k, k], torch.Generator().manual_seed(7)).sample(torch.arange(10))
    for et, ei in batch.edge_index.items():
        indptr, indices = csc[et]
        src = batch.nodes[et[0]][ei[0]]
        dst = batch.nodes[et[2]][ei[1]]
        per_dst = Counter(dst.tolist())
        for v, n in per_dst.items():
            nbrs = indices[indptr[v] : indptr[v + 1]].tolist()
            assert n == min(len(nbrs), k)  # all of them when deg <= k, else exactly k
        pairs = list(zip(src.tolist(), dst.tolist()))
        assert len(pairs) == len(set(pairs))  # without replacement
        for s, d in pairs:
            assert s in indices[indptr[d] : indptr[d + 1]].tolist()  # the edge exists


def test_neighbour_choice_is_uniform():
    deg, k, trials = 10, 3, 4000
    indptr = torch.tensor([0, deg])
    indices = torch.arange(100, 100 + deg)
    nodes = torch.zeros(trials, dtype=torch.long)  # the same node, many times, one vectorised call
    nbr, where = sample_neighbors(indptr, indices, nodes, k, torch.Generator().manual_seed(0))
    assert nbr.numel() == trials * k
    rows = nbr.view(trials, k)
    assert all(len(set(r)) == k for r in rows.tolist())  # a k-subset every time
    freq = torch.bincount(nbr - 100, minlength=deg).double() / trials
    assert torch.allclose(freq, torch.full((deg,), k / deg, dtype=torch.float64), atol=0.03)
    # `where` maps each sampled edge back to the position of the node that sampled it
    assert torch.equal(where, torch.arange(trials).repeat_interleave(k))


def test_same_generator_seed_same_batch_and_the_table_is_reset():
    csc = _graph(2)
    a = HeteroNeighborSampler(csc, NUM, [4, 3, 2], torch.Generator().manual_seed(5))
    b = HeteroNeighborSampler(csc, NUM, [4, 3, 2], torch.Generator().manual_seed(5))
    x1, y1 = a.sample(torch.arange(8)), b.sample(torch.arange(8))
    for t in NUM:
        assert torch.equal(x1.nodes[t], y1.nodes[t])
    assert all((v == -1).all() for v in a._assoc.values())
    x2 = a.sample(torch.arange(8, 16))
    assert x2.nodes["paper"][:8].tolist() == list(range(8, 16))


@pytest.mark.parametrize("seed", [0, 1])
def test_per_node_reference_respects_the_fan_out_too(seed):
    csc = _graph(seed)
    batch = sample_per_node(csc, [2, 2], [1, 2, 3], rng=random.Random(seed))
    for ei in batch.edge_index.values():
        assert all(n <= 2 for n in Counter(ei[1].tolist()).values())
