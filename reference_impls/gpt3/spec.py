"""The gpt3 benchmark as the harness sees it: one typed spec (harness/core/spec.py).

GPT-3 175B pretraining on megatron-core (C4; tiny: synthetic corpus).
Torch-free to import: the CLI reads this module; the training code is imported only when a process
started with a plan calls `run`, `prepare` or `lr_find`.
"""

from __future__ import annotations

from benchmarks.gpt3.config import Gpt3Config
from harness.core.spec import BenchmarkSpec
from reference_impls.gpt3 import manifest


def run(rt):
    from reference_impls.gpt3.train import run as train

    return train(rt)


def prepare(plan) -> None:
    import sys

    from reference_impls.gpt3.prepare import prepare as prep

    prep(plan, log=lambda m: print(m, file=sys.stderr, flush=True))


def lr_find(rt):
    from reference_impls.gpt3.lr_find import lr_find as sweep

    return sweep(rt)


def build(cfg, layout, device: str) -> dict:
    from reference_impls.gpt3.shapes import build_report

    return build_report(cfg, layout, device)


SPEC = BenchmarkSpec(
    name="gpt3",
    module="reference_impls.gpt3",
    config=Gpt3Config,
    run=run,
    prepare=prepare,
    is_prepared=manifest.is_prepared,
    lr_find=lr_find,
    build=build,
    power_extension=True,  # train.py: trains on after run_stop until rt.more_power_readings() is False
)
