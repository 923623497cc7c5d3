"""The LR range test's sweep in a rank, one loop for every benchmark that has `impl.lr_find`
(reference_impls/megatron_gpt/lr_find.py, reference_impls/llama2_70b_lora/lr_find.py): each gives
its own optimizer step as `step(s, lr) -> loss`, from the same starting point as a real run.

`mlperf lr-find` (harness/run/lr_find.py) writes `<run_dir>/lr_find_request.json` ({"steps",
"min_lr", "max_lr"}); step s uses lr = min_lr * (max_lr / min_lr) ** (s / (steps - 1)), the sweep
ends early once the loss has clearly diverged, and rank 0 writes `<run_dir>/lr_find_raw.json`,
which harness/run/lr_find.py smooths, cuts and plots. No MLPerf log line, nothing in the results
tree: this is not a timed run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

from harness.core.runfolder import LR_FIND_RAW as RAW
from harness.core.runfolder import LR_FIND_REQUEST as REQUEST

DIVERGED = 4.0  # stop when the loss exceeds 4x the best loss seen


def request(rt, default_steps: int) -> tuple[int, float, float]:
    """(steps, min_lr, max_lr) asked for; steps null: the benchmark's own `default_steps` (the
    benchmark knows how long its curve is; the harness names no benchmark)."""
    req = json.loads((Path(rt.plan.run_dir) / REQUEST).read_text())
    steps = default_steps if req.get("steps") is None else int(req["steps"])
    return steps, float(req["min_lr"]), float(req["max_lr"])


def sweep(rt, steps: int, min_lr: float, max_lr: float, step: Callable[[int, float], float]) -> dict:
    """{"lrs", "losses"} of the exponential sweep, with the run's configured LR, GBS and layout;
    `step(s, lr)` trains step s at `lr` and returns its loss (the same value on every rank: the
    callers reduce it)."""
    lrs: list[float] = []
    losses: list[float] = []
    best = math.inf
    ratio = max_lr / min_lr
    for s in range(steps):
        if rt.should_stop(s):  # agreed by all ranks: none is left waiting in a collective
            break
        lr = min_lr * ratio ** (s / max(steps - 1, 1))
        loss = float(step(s, lr))
        lrs.append(lr)
        losses.append(loss)
        if math.isfinite(loss):
            best = min(best, loss)
        if not math.isfinite(loss) or loss > DIVERGED * best:
            break
    return {
        "steps": steps,
        "lrs": lrs,
        "losses": [x if math.isfinite(x) else None for x in losses],
        "configured_lr": rt.cfg.opt_base_learning_rate,
        "global_batch_size": rt.cfg.global_batch_size,
        "layout": rt.plan.layout.describe(),
    }


def write_raw(rt, out: dict) -> None:
    """Rank 0 writes the raw curve (plus what the benchmark adds: configured LR, GBS, layout)."""
    if rt.is_rank0:
        (Path(rt.plan.run_dir) / RAW).write_text(json.dumps(out))
