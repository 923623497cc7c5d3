"""LR range test for GPT-3: `impl.lr_find`, run in every rank for a plan with task "lr_find".

Started by `mlperf lr-find gpt3 --system NAME` (harness/commands/lr_find.py). The sweep loop, its
request and raw-curve files are harness/train/lr_sweep.py's (shared with llama2_70b_lora); here the
step: from the same starting checkpoint as a real run, on the run's own data order, the training
loss of every step reduced over the ranks (one host sync per step: this is not a timed run).
"""

from __future__ import annotations

from harness.train import lr_sweep
from reference_impls.megatron_gpt.train import Stepper, datasets, start_model, train_microbatches

STEPS = 300  # the default sweep: tiny gpt3's curve needs the 300 harness/run/lr_find.py measured with


def sweep(rt, steps: int, min_lr: float, max_lr: float) -> dict:
    plan = rt.plan
    cfg, layout = rt.cfg, plan.layout
    model, optimizer, scheduler, tcfg = start_model(rt)
    train, _ = datasets(rt)
    stepper = Stepper(model, optimizer, scheduler, tcfg, cfg, layout, rt.device)

    def step(s: int, lr: float) -> float:
        for g in optimizer.param_groups:
            g["lr"] = lr
        return stepper.reduce_loss(stepper.train_step(train_microbatches(train, s, layout)))

    return lr_sweep.sweep(rt, steps, min_lr, max_lr, step)


def lr_find(rt) -> None:
    """The sweep in this rank (impl.lr_find); rank 0 writes the raw curve for `mlperf lr-find`."""
    try:
        lr_sweep.write_raw(rt, sweep(rt, *lr_sweep.request(rt, STEPS)))
    finally:
        from megatron.core import parallel_state as ps

        if ps.model_parallel_is_initialized():
            ps.destroy_model_parallel()
