"""Stable Diffusion v2 reference implementation (tiny on CPU, full on GPU clusters); see README.md."""
