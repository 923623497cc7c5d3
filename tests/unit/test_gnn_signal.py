"""The tiny graph is a graph task: the paper features alone cannot reach the 0.72 target, the
neighbours' features can. Without this, a broken sampler or broken message passing would still
train a features-only classifier to the target and pass every gnn test."""

import numpy as np
import pytest
from helpers import make_plan, typed_config
from sklearn.linear_model import LogisticRegression

from reference_impls.gnn import data, prepare

TARGET = 0.72


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """The shipped tiny config's graph (prepare costs well under a second)."""
    root = tmp_path_factory.mktemp("gnn-signal")
    plan = make_plan("gnn", root, seed=1, data_dir=root / "data")
    prepare.prepare(plan)
    return data.load(plan.data_dir, typed_config(plan), in_memory=True)


def _probe(x: np.ndarray, g) -> float:
    """Validation accuracy of a multinomial logistic regression fit (to convergence) on the train seeds."""
    y, tr, va = g.labels.numpy(), g.train_idx.numpy(), g.val_idx.numpy()
    model = LogisticRegression(max_iter=1000).fit(x[tr], y[tr])
    return float(model.score(x[va], y[va]))


def _neighbour_means(g) -> np.ndarray:
    """Per paper: the mean feature of its 1-hop in-neighbours, one block per edge type into paper."""
    x = {t: f.float().numpy() for t, f in g.features.items()}
    blocks = []
    for (src, _, dst), (indptr, indices) in g.csc.items():
        if dst != "paper":
            continue
        deg = np.diff(indptr.numpy())
        total = np.zeros_like(x["paper"])
        np.add.at(total, np.repeat(np.arange(deg.size), deg), x[src][indices.numpy()])
        blocks.append(total / np.maximum(deg, 1)[:, None])
    return np.concatenate(blocks, axis=1)


def test_features_alone_stay_far_below_the_target_and_the_neighbours_carry_the_signal(graph):
    own = graph.features["paper"].float().numpy()
    alone = _probe(own, graph)
    # Measured 0.34 (README); chance is 1/19. A linear probe is close to the best a per-node
    # classifier can do here (the classes are Gaussian blobs with one shared covariance).
    assert alone <= 0.5, alone
    with_neighbours = _probe(np.concatenate([own, _neighbour_means(graph)], axis=1), graph)
    # Measured 0.95: one hop of mean aggregation already clears the target by a wide margin.
    assert with_neighbours >= TARGET + 0.1 and with_neighbours > alone + 0.4, (alone, with_neighbours)
