"""Stable Diffusion v2 text-to-image (MLPerf Training v4.0): rules, typed config, tuned configs."""
