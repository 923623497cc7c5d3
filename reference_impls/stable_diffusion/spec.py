"""The stable_diffusion benchmark as the harness sees it: one typed spec (harness/core/spec.py).

Stable Diffusion v2 on LAION-400M latents (diffusers UNet).
Torch-free to import: the CLI reads this module; the training code is imported only when a process
started with a plan calls `run`, `prepare` or `lr_find`.
"""

from __future__ import annotations

from benchmarks.stable_diffusion.config import StableDiffusionConfig
from harness.core.spec import BenchmarkSpec
from reference_impls.stable_diffusion import manifest


def run(rt):
    from reference_impls.stable_diffusion.train import run as train

    return train(rt)


def prepare(plan) -> None:
    from reference_impls.stable_diffusion.prepare import prepare as prep

    prep(plan)


def build(cfg, layout, device: str) -> dict:
    from reference_impls.stable_diffusion.shapes import build_report

    return build_report(cfg, layout, device)


SPEC = BenchmarkSpec(
    name="stable_diffusion",
    module="reference_impls.stable_diffusion",
    config=StableDiffusionConfig,
    run=run,
    prepare=prepare,
    is_prepared=manifest.is_prepared,
    lr_find=None,
    build=build,
)
