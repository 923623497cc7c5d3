"""LR range test for GPT-3: `impl.lr_find`, run in every rank for a plan with task "lr_find".

Started by `mlperf lr-find gpt3 --system NAME` (harness/commands/lr_find.py), which writes the sweep
request to `<run_dir>/lr_find_request.json` ({"steps", "min_lr", "max_lr"}). From the same starting
checkpoint as a real run, step s uses lr = min_lr * (max_lr / min_lr) ** (s / (steps - 1)) on the
run's own data order; the training loss of every step is reduced over the ranks (one host sync per
step: this is not a timed run) and rank 0 writes `<run_dir>/lr_find_raw.json`. The sweep ends early
once the loss has clearly diverged. Writes no MLPerf log lines and nothing under the results tree.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from reference_impls.megatron_gpt.train import Stepper, datasets, start_model, train_microbatches

DIVERGED = 4.0  # stop when the loss exceeds 4x the best loss seen


def sweep(rt, steps: int, min_lr: float, max_lr: float) -> dict:
    plan = rt.plan
    cfg, layout = rt.cfg, plan.layout
    model, optimizer, scheduler, tcfg = start_model(rt)
    train, _ = datasets(rt)
    stepper = Stepper(model, optimizer, scheduler, tcfg, cfg, layout, rt.device)
    lrs, losses = [], []
    best = math.inf
    ratio = max_lr / min_lr
    for s in range(steps):
        if rt.should_stop(s):  # agreed by all ranks: none is left waiting in a collective
            break
        lr = min_lr * ratio ** (s / max(steps - 1, 1))
        for g in optimizer.param_groups:
            g["lr"] = lr
        reports = stepper.train_step(train_microbatches(train, s, layout))
        loss = stepper.reduce_loss(reports)
        lrs.append(lr)
        losses.append(loss)
        if math.isfinite(loss):
            best = min(best, loss)
        if not math.isfinite(loss) or loss > DIVERGED * best:
            break
    return {
        "lrs": lrs,
        "losses": [x if math.isfinite(x) else None for x in losses],
        "configured_lr": cfg.opt_base_learning_rate,
        "global_batch_size": cfg.global_batch_size,
        "layout": layout.describe(),
    }


def lr_find(rt) -> None:
    """The sweep in this rank (impl.lr_find); rank 0 writes the raw curve for `mlperf lr-find`."""
    req = json.loads((Path(rt.plan.run_dir) / "lr_find_request.json").read_text())
    try:
        out = sweep(rt, int(req["steps"]), float(req["min_lr"]), float(req["max_lr"]))
        if rt.is_rank0:
            (Path(rt.plan.run_dir) / "lr_find_raw.json").write_text(json.dumps(out))
    finally:
        from megatron.core import parallel_state as ps

        if ps.model_parallel_is_initialized():
            ps.destroy_model_parallel()
