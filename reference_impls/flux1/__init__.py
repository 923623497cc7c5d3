"""FLUX.1 text-to-image reference implementation (diffusers FluxTransformer2DModel; see README.md)."""
