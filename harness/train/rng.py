"""Every random number generator of a training process, captured as tensors and restored.

    state = capture_rng()       # into a checkpoint's rank file (tensors load with weights_only)
    restore_rng(state)          # after a resume: the run continues with the same random draws

Tensors only, so that a checkpoint is read back with `torch.load(weights_only=True)`
(harness/train/checkpoint.py never unpickles).
"""

from __future__ import annotations

import random
from typing import Any


def capture_rng() -> dict:
    """Every RNG this process uses, as tensors: torch CPU, CUDA (all devices), Python `random`,
    NumPy's global generator and megatron's model-parallel RNG tracker when it is in use."""
    import sys

    import numpy as np
    import torch

    out: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = list(torch.cuda.get_rng_state_all())
    version, internal, gauss = random.getstate()
    out["python"] = {
        "version": torch.tensor(version),
        "state": torch.tensor(internal, dtype=torch.int64),
        "gauss": torch.tensor(float("nan") if gauss is None else gauss, dtype=torch.float64),
    }
    name, keys, pos, has_gauss, cached = np.random.get_state()
    out["numpy"] = {
        "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
        "meta": torch.tensor([pos, has_gauss], dtype=torch.int64),
        "cached": torch.tensor(cached, dtype=torch.float64),
    }
    if "megatron.core.tensor_parallel.random" in sys.modules:
        tracker = sys.modules["megatron.core.tensor_parallel.random"].get_cuda_rng_tracker()
        states = tracker.get_states()
        if states:
            out["megatron_tracker"] = {k: v.clone().cpu() for k, v in states.items()}
    return out


def restore_rng(state: dict) -> None:
    import sys

    import numpy as np
    import torch

    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    py = state["python"]
    gauss = float(py["gauss"])
    random.setstate(
        (int(py["version"]), tuple(int(x) for x in py["state"].tolist()), None if gauss != gauss else gauss)
    )
    n = state["numpy"]
    pos, has_gauss = (int(x) for x in n["meta"].tolist())
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), pos, has_gauss, float(n["cached"])))
    if "megatron_tracker" in state and "megatron.core.tensor_parallel.random" in sys.modules:
        tracker = sys.modules["megatron.core.tensor_parallel.random"].get_cuda_rng_tracker()
        tracker.set_states(state["megatron_tracker"])
