"""The llama2_70b_lora benchmark as the harness sees it: one typed spec (harness/core/spec.py).

Llama 2 70B LoRA fine-tuning on GovReport (transformers + peft, FSDP/CP).
Torch-free to import: the CLI reads this module; the training code is imported only when a process
started with a plan calls `run`, `prepare` or `lr_find`.
"""

from __future__ import annotations

from benchmarks.llama2_70b_lora.config import Llama2LoraConfig
from harness.core.spec import BenchmarkSpec
from reference_impls.llama2_70b_lora import manifest


def run(rt):
    from reference_impls.llama2_70b_lora.train import run as train

    return train(rt)


def prepare(plan) -> None:
    from reference_impls.llama2_70b_lora.prepare import prepare as prep

    prep(plan)


def build(cfg, layout, device: str) -> dict:
    from reference_impls.llama2_70b_lora.shapes import build_report

    return build_report(cfg, layout, device)


SPEC = BenchmarkSpec(
    name="llama2_70b_lora",
    module="reference_impls.llama2_70b_lora",
    config=Llama2LoraConfig,
    run=run,
    prepare=prepare,
    is_prepared=manifest.is_prepared,
    lr_find=None,
    build=build,
)
