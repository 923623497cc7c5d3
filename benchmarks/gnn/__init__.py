"""R-GAT on IGBH (torch-geometric; host-side neighbour sampling) as one Benchmark object.
Training code: reference_impls/gnn/ (named here lazily: importing this never imports torch)."""

from __future__ import annotations

from benchmarks.benchmark import Benchmark
from benchmarks.gnn.config import GnnConfig
from benchmarks.gnn.cost import COST
from harness.core.benchmark import implementation
from harness.core.data_manifest import DataManifest

_IMPL = "reference_impls.gnn"

# The graph's shape (tiny: generated from it; full: checked against it), and the tiny generator's knobs.
# fmt: off
DATA = DataManifest(
    fields=("dataset_size", "num_nodes", "num_labeled_papers", "train_frac", "validation_frac", "split_seed",
            "in_channels", "num_classes"),
    tiny_fields=("synth_edges_per_paper", "synth_homophily", "synth_feature_noise", "synth_seed"),
)
# fmt: on

BENCHMARK = Benchmark.here(
    __file__, GnnConfig, COST, implementation(_IMPL, DATA, prepare="prepare:prepare_once"), modality="graph"
)
