"""FLUX.1 text-to-image (diffusers FluxTransformer2DModel, rectified flow, validation loss) as one
Benchmark object. Training code: reference_impls/flux1/ (named here lazily: importing this never
imports torch)."""

from __future__ import annotations

from benchmarks.benchmark import Benchmark
from benchmarks.flux1.config import Flux1Config
from benchmarks.flux1.cost import COST
from harness.core.benchmark import implementation
from harness.core.data_manifest import DataManifest

_IMPL = "reference_impls.flux1"

# What shapes the data on disk (tiny: generated from it; full: checked against it); tiny only: the
# tiny VAE's training steps. The transformer's own shape is not among them (trained from the init).
# fmt: off
DATA = DataManifest(fields=(
    "latent_channels", "latent_size", "joint_attention_dim", "pooled_projection_dim", "text_max_length",
    "train_samples", "eval_samples", "eval_timesteps", "train_dir", "eval_dir", "empty_encodings_dir", "vae_dir",
), tiny_fields=("tiny_vae_steps",))
# fmt: on

BENCHMARK = Benchmark.here(__file__, Flux1Config, COST, implementation(_IMPL, DATA), modality="image")
