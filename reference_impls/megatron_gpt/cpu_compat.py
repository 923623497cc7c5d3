"""megatron-core on a CPU-only host: the contained compatibility layer (tested with 0.19.2).

megatron-core has no CPU path; it calls `torch.cuda.*` and uses `device="cuda"` literals in a few
places, checks dtypes as `param.type() == "torch.cuda.FloatTensor"`, and its torch-norm fallback
refuses sequence parallel. `enable()` maps exactly those to the CPU and returns the number of
patches applied (15; 14 on a CPU-only torch build). When CUDA is available it does nothing at all
and returns 0: the GPU path runs megatron-core untouched.

    from reference_impls.megatron_gpt import cpu_compat
    cpu_compat.enable()          # before building the model; idempotent

The patches, each answering a failure megatron-core meets on a CPU-only torch:
  1  torch.cuda.current_device -> "cpu"         (used as a device argument when tensors are made)
  2  torch.cuda.synchronize -> no-op
  3  torch.cuda.get_rng_state -> the CPU state    (callers that save the CUDA RNG state)
  4  torch.cuda.manual_seed -> torch.manual_seed  (model_parallel_cuda_manual_seed)
  5, 6  megatron.core.tensor_parallel.random._get/_set_cuda_rng_state -> the CPU generator (the
     RNG tracker's forks: dropout, init)
  7  that module's logger at ERROR (each fork would warn that the CPU RNG changed in a GPU fork)
  8  CheckpointFunction.backward re-enters the mode below (activation recompute reruns the
     forward inside autograd's backward, where torch turns function modes off)
  9  WrappedTorchNorm.__new__ builds the torch norm under sequence parallel and marks its params
     `sequence_parallel` (finalize_model_grads then sums their grads over TP)
  10 CudaToCpu, a process-wide TorchFunctionMode: `device="cuda..."` keyword arguments -> cpu (the
     schedules' loss counters, the optimizers' scalars, the causal mask), `Tensor.cuda()` -> the
     tensor itself, and `Tensor.type()` names CPU types as their CUDA twins (the distributed and
     fp16/bf16 optimizers' wrappers, grad clipping compare those strings)
  11 torch.cuda.current_stream -> torch.cpu.current_stream, whose wait_event/wait_stream do
     nothing (0.19's distributed/param_and_grad_buffer.py start_grad_sync waits on CUDA-graph
     wgrad events in every grad sync, graphs or not)
  12 any other CUDA initialisation raises UnpatchedCudaCall naming the first non-torch caller
     (file:line): what a megatron upgrade adds on the path the tiny runs take fails with the call
     site to patch, not with "Found no NVIDIA driver" deep in torch. Hooked at
     torch._C._cuda_init, where torch.cuda's lazy initialisation ends on a CUDA build (the only
     torch PyPI has for Python 3.12): device queries, `.to("cuda")`, RNG and memory calls. A
     stream or event made directly in C (`torch.cuda.Stream()`) fails with torch's own CUDA
     error instead, and a CPU-only build with "Torch not compiled with CUDA enabled".
  13-15 the mixture-of-experts layer's: the all-to-all dispatcher's side stream and split sizes,
     and biased experts (cpu_moe.py)
and, while megatron.core is first imported only, `torch.compile` as a pass-through
(`_import_megatron_eager`). bf16 needs nothing more: Float16Module's casts test the legacy tensor
types, which include CPU ones, and the bf16 optimizer's checks go through patch 10.

With it, everything the record layouts use runs under gloo: TP, sequence parallel, PP with
interleaving (VP), DP, the distributed optimizer, overlapped grad reduce / param gather, bf16, and
dist_checkpointing. What needs CUDA kernels or Transformer Engine (FP8, CUDA graphs, TP comm
overlap's userbuffers) is refused on CPU by the config (benchmarks/gpt3/config.py SWITCHES).
"""

from __future__ import annotations

import logging

import torch
from torch.overrides import TorchFunctionMode

_state = {"enabled": False, "mode": None}


class UnpatchedCudaCall(RuntimeError):
    """megatron (or torch on its behalf) initialised CUDA at a call site this layer does not map."""


def _refuse_cuda_init(*_args, **_kwargs):
    import traceback

    import megatron.core

    stack = traceback.extract_stack()[:-1]
    ours = ("/torch/", __file__)  # the first caller outside torch and this layer's function mode
    site = next((f for f in reversed(stack) if not any(o in f.filename for o in ours)), None)
    where = f"{site.filename}:{site.lineno} ({(site.line or '').strip()})" if site else "unknown caller"
    raise UnpatchedCudaCall(
        f"cpu_compat: {where} needs CUDA, which this host lacks, and megatron-core "
        f"{megatron.core.__version__} reaches it on the CPU path: map that call in "
        "reference_impls/megatron_gpt/cpu_compat.py"
    )


class CudaToCpu(TorchFunctionMode):
    """Rewrite `device="cuda..."` keyword arguments to "cpu", make `Tensor.cuda()` a no-op, and
    name CPU tensor types as their CUDA twins in `Tensor.type()` (megatron checks dtypes by
    comparing `param.type()` with "torch.cuda.FloatTensor" etc.: optimizer wrappers, clipping)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.type and len(args) == 1 and not kwargs:
            name = func(*args)
            return name.replace("torch.", "torch.cuda.", 1) if args[0].device.type == "cpu" else name
        d = kwargs.get("device")
        if d is not None and (
            (isinstance(d, str) and d.startswith("cuda"))
            or (isinstance(d, torch.device) and d.type == "cuda")
        ):
            kwargs = dict(kwargs, device="cpu")
        return func(*args, **kwargs)


def _sequence_parallel_norm(orig_new):
    """megatron's torch-norm wrapper refuses sequence parallel only because torch's LayerNorm does
    not carry the `sequence_parallel` attribute (TE/Apex norms do). The norm itself is per token,
    so it is exact on a sequence shard; what SP needs is that its weight/bias gradients, partial
    per TP rank, are summed over TP, which finalize_model_grads does for params marked this way."""

    def new(cls, config, hidden_size, *args, **kwargs):
        sp = config.sequence_parallel
        config.sequence_parallel = False  # pass the assert; restored before anything else reads it
        try:
            norm = orig_new(cls, config, hidden_size, *args, **kwargs)
        finally:
            config.sequence_parallel = sp
        for p in norm.parameters():
            p.sequence_parallel = sp
        return norm

    return new


def _recompute_under_mode(orig_backward):
    """Activation recompute reruns the forward inside an autograd backward, where torch runs with
    function modes off, so its `device="cuda"` literals (the causal mask) would escape the mode."""

    def backward(ctx, *grads):
        with CudaToCpu():
            return orig_backward(ctx, *grads)

    return staticmethod(backward)


def _import_megatron_eager() -> None:
    """Import megatron-core with `torch.compile` as a pass-through decorator. megatron wraps its
    fusion kernels (bias-GeLU/GeGLU/SwiGLU, ...) in `torch.compile` at import, which loads dynamo
    and inductor: ~4 of the ~10 s a CPU rank spends importing megatron, in every rank of every run.
    The CPU path calls none of them (the local spec, no bias-activation fusion); were one called,
    it would run eagerly, the same arithmetic. A later `import megatron...` finds the modules
    already loaded. Does nothing once megatron.core is imported."""
    import sys

    if "megatron.core" in sys.modules:
        return
    compile_ = torch.compile
    torch.compile = lambda model=None, **kw: model if model is not None else (lambda f: f)
    try:
        import megatron.core  # noqa: F401
    finally:
        torch.compile = compile_


def enable() -> int:
    """Install the layer when CUDA is absent; return how many patches were applied (0 on GPU)."""
    if torch.cuda.is_available():
        return 0
    if _state["enabled"]:
        return 0
    _import_megatron_eager()
    torch.cuda.current_device = lambda: "cpu"
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.get_rng_state = lambda *a, **k: torch.get_rng_state()
    torch.cuda.manual_seed = torch.manual_seed
    torch.cuda.current_stream = torch.cpu.current_stream
    hooked = hasattr(torch._C, "_cuda_init")  # absent from CPU-only builds
    if hooked:
        torch._C._cuda_init = _refuse_cuda_init
    import megatron.core.tensor_parallel.random as mrandom

    mrandom._get_cuda_rng_state = lambda *a, **k: torch.get_rng_state()
    mrandom._set_cuda_rng_state = lambda s, *a, **k: torch.set_rng_state(s)
    # Every RNG-tracker fork would log "CPU RNG state changed within GPU RNG context".
    logging.getLogger(mrandom.__name__).setLevel(logging.ERROR)
    mrandom.CheckpointFunction.backward = _recompute_under_mode(mrandom.CheckpointFunction.backward)
    from megatron.core.transformer.torch_norm import WrappedTorchNorm

    WrappedTorchNorm.__new__ = _sequence_parallel_norm(WrappedTorchNorm.__new__)
    mode = CudaToCpu()
    mode.__enter__()  # process-wide, for the life of the training process
    _state.update(enabled=True, mode=mode)
    from reference_impls.megatron_gpt import cpu_moe

    return 11 + hooked + cpu_moe.enable()


def is_enabled() -> bool:
    return _state["enabled"]
