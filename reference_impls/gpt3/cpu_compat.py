"""megatron-core on a CPU-only torch: the contained compatibility layer (tested with 0.16.1).

megatron-core has no CPU path; it calls `torch.cuda.*` and uses `device="cuda"` literals in a few
places (RNG tracker, `current_device()` as a device argument, the schedules' loss counters, the
FP32 optimizer's scalars, the causal mask, grad clipping's `torch.cuda.FloatTensor` assert).
`enable()` maps exactly those to the CPU and returns the number of patches applied. When CUDA is
available it does nothing at all and returns 0: the GPU path runs megatron-core untouched.

    from reference_impls.gpt3 import cpu_compat
    cpu_compat.enable()          # before building the model; idempotent

See ../shared/notes/cpu-stack.md for each failure this answers. Still unsupported on CPU (refused
earlier by the config check): sequence parallel (needs TE/Apex norms), the distributed optimizer.
"""

from __future__ import annotations

import logging

import torch
from torch.overrides import TorchFunctionMode

_state = {"enabled": False, "mode": None}


class CudaToCpu(TorchFunctionMode):
    """Rewrite `device="cuda..."` keyword arguments to "cpu" and make `Tensor.cuda()` a no-op."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.cuda:
            return args[0]
        d = kwargs.get("device")
        if d is not None and (
            (isinstance(d, str) and d.startswith("cuda"))
            or (isinstance(d, torch.device) and d.type == "cuda")
        ):
            kwargs = dict(kwargs, device="cpu")
        return func(*args, **kwargs)


def _clip_grad_by_total_norm_cpu(parameters, max_norm, total_norm, use_decoupled_grad=False):
    """megatron's clip without its `torch.cuda.FloatTensor` assert (same arithmetic)."""
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    coeff = max_norm / (total_norm + 1.0e-6)
    if coeff < 1.0:
        for p in parameters:
            g = getattr(p, "decoupled_grad", None) if use_decoupled_grad else p.grad
            if g is not None:
                g.detach().mul_(coeff)


def enable() -> int:
    """Install the layer when CUDA is absent; return how many patches were applied (0 on GPU)."""
    if torch.cuda.is_available():
        return 0
    if _state["enabled"]:
        return 0
    torch.cuda.current_device = lambda: "cpu"
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.get_rng_state = lambda *a, **k: torch.get_rng_state()
    torch.cuda.manual_seed = torch.manual_seed
    import megatron.core.optimizer.optimizer as mopt
    import megatron.core.tensor_parallel.random as mrandom

    mrandom._get_cuda_rng_state = lambda *a, **k: torch.get_rng_state()
    mrandom._set_cuda_rng_state = lambda s, *a, **k: torch.set_rng_state(s)
    # Every RNG-tracker fork would log "CPU RNG state changed within GPU RNG context".
    logging.getLogger(mrandom.__name__).setLevel(logging.ERROR)
    mopt.clip_grad_by_total_norm_fp32 = _clip_grad_by_total_norm_cpu
    mode = CudaToCpu()
    mode.__enter__()  # process-wide, for the life of the training process
    _state.update(enabled=True, mode=mode)
    return 9


def is_enabled() -> bool:
    return _state["enabled"]
