"""Where Adam's step count lives, for whichever Adam megatron-core built.

megatron-core's `get_megatron_optimizer` (0.16.1 and 0.19.2) takes Transformer Engine's `FusedAdam` when TE is
importable, else Apex's, else torch's `Adam`/`AdamW` (megatron/core/optimizer/__init__.py). They
keep the step in different places:

    torch Adam / AdamW        state[p]["step"]       a 0-dim float32 tensor per parameter, created
                                                     with the moments on the first step
    TE / Apex FusedAdam       param_group["step"]    one int per group (a tensor when capturable),
                                                     created on the first step; groups without
                                                     params are skipped; state[p] holds only
                                                     exp_avg, exp_avg_sq (and master_param), and
                                                     TE's state_dict()/load_state_dict() fail on
                                                     any other key (KeyError in name_to_dtype_map)

So a per-parameter step written into a fused Adam is ignored by its kernel (bias correction
restarts at step 1) and breaks its next state_dict(). The place is read from the optimizer
object, not from which libraries import: a parameter state that has a step says per parameter;
without one (before the first step) torch's own Adam/AdamW count per parameter and every other
Adam megatron builds counts per group.
"""

from __future__ import annotations

import torch


def per_group(inner) -> bool:
    """True when `inner` (the torch.optim.Optimizer megatron wraps) counts steps per param group.
    The distributed optimizer gives torch Adam's groups a stale "step" key on load (unused by it),
    so a group's "step" alone does not decide; a parameter state's does."""
    if any("step" in s for s in inner.state.values()):
        return False
    return not isinstance(inner, torch.optim.Adam)  # AdamW subclasses Adam in torch >= 2.5


def get(grouped: bool, group: dict, state: dict) -> float | None:
    """The step of one parameter (its `state`, in `group`; `grouped` = per_group(its optimizer));
    None before the first step."""
    step = group.get("step") if grouped else state.get("step")
    return None if step is None else float(step)


def put(grouped: bool, group: dict, state: dict, step: float) -> None:
    """Set the step of one parameter where its optimizer keeps it (`grouped` = per_group(it))."""
    if grouped:
        old = group.get("step")
        if isinstance(old, torch.Tensor):  # capturable FusedAdam: a device tensor the graph reads
            old.fill_(int(step))
        else:
            group["step"] = int(step)
        state.pop("step", None)
    else:
        state["step"] = torch.tensor(float(step), dtype=torch.float32)
