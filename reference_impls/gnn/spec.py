"""The gnn benchmark as the harness sees it: one typed spec (harness/core/spec.py).

R-GAT on IGBH (torch-geometric; host-side neighbour sampling).
Torch-free to import: the CLI reads this module; the training code is imported only when a process
started with a plan calls `run`, `prepare` or `lr_find`.
"""

from __future__ import annotations

from benchmarks.gnn.config import GnnConfig
from harness.core.spec import BenchmarkSpec
from reference_impls.gnn import manifest


def run(rt):
    from reference_impls.gnn.train import run as train

    return train(rt)


def prepare(plan) -> None:
    from reference_impls.gnn.prepare import prepare_once

    prepare_once(plan)


def build(cfg, layout, device: str) -> dict:
    from reference_impls.gnn.shapes import build_report

    return build_report(cfg, layout, device)


SPEC = BenchmarkSpec(
    name="gnn",
    module="reference_impls.gnn",
    config=GnnConfig,
    run=run,
    prepare=prepare,
    is_prepared=manifest.is_prepared,
    lr_find=None,
    build=build,
)
