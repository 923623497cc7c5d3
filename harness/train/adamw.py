"""torch AdamW from a benchmark config's `opt_adamw_*` fields, at its schedule's first LR.

One builder for the benchmarks whose loop sets the LR itself each step (`cfg.lr_at(step)` into
the param groups): llama2_70b_lora and flux1. stable_diffusion builds its own (it may wrap AdamW
in ZeroRedundancyOptimizer); the Megatron family uses megatron's optimizer.
"""

from __future__ import annotations

import torch


def adamw(cfg, params) -> torch.optim.AdamW:
    return torch.optim.AdamW(
        params,
        lr=cfg.lr_at(0),
        betas=(cfg.opt_adamw_beta_1, cfg.opt_adamw_beta_2),
        eps=cfg.opt_adamw_epsilon,
        weight_decay=cfg.opt_adamw_weight_decay,
    )
