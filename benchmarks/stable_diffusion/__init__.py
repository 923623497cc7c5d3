"""Stable Diffusion v2 text-to-image (diffusers UNet, FID + CLIP) as one Benchmark object.
Training code: reference_impls/stable_diffusion/ (named here lazily: importing this never imports torch)."""

from __future__ import annotations

from benchmarks.benchmark import Benchmark
from benchmarks.stable_diffusion.config import StableDiffusionConfig
from benchmarks.stable_diffusion.cost import COST
from harness.core.benchmark import implementation
from harness.core.data_manifest import DataManifest

_IMPL = "reference_impls.stable_diffusion"

# What shapes the data on disk (tiny: generated from it; full: checked against it); tiny only:
# the tiny generator's training steps.
# fmt: off
DATA = DataManifest(fields=(
    "latent_channels", "latent_size", "text_encoder", "text_max_length", "train_samples", "eval_samples",
    "train_shards", "eval_captions", "fid_stats", "sd_checkpoint", "vae_config", "clip_text_checkpoint",
    "inception_checkpoint", "cross_attention_dim",
), tiny_fields=("tiny_vae_steps", "tiny_classifier_steps"))
# fmt: on

BENCHMARK = Benchmark.here(
    __file__, StableDiffusionConfig, COST, implementation(_IMPL, DATA), modality="image"
)
