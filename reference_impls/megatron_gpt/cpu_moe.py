"""megatron-core's mixture-of-experts layer on a CPU-only host: cpu_compat's patches 13-15 (tested
with 0.19.2; measured in issue 45: EP=2 under gloo equals EP=1, the all-to-all dispatcher bit for
bit equal to the all-gather one). Installed by `cpu_compat.enable()`, so never on a GPU host.

  13 the all-to-all dispatcher's device-to-host side stream (token_dispatcher.py: a class-wide
     `torch.cuda.Stream()` made at build) -> a stream that does nothing, and `torch.cuda.stream(s)`
     -> a null context: on a CPU the copies it overlaps are already on the host
  14 `maybe_move_tensor_to_cpu(t, as_numpy=True)` converts only CUDA tensors to numpy
     (moe_utils.py), so the split sizes reached gloo's all_to_all_single as tensors: CPU tensors
     are converted too
  15 an expert's fc2 with a bias (add_bias_linear: gpt-oss's original) adds the bias in place on
     the linear's output (mlp.py, `output += output_bias ...`), a view autograd refuses to modify:
     expert RowParallelLinear outputs are returned as their own tensors

What the layout changes of a mixture of experts' initial weights (each rank draws its own experts)
is not a CPU matter: layout_init.py draws them again.
"""

from __future__ import annotations

import contextlib

import torch


class _HostStream:
    """What the dispatcher asks of its side stream, doing nothing: the work is on the host."""

    def wait_stream(self, *_a, **_k) -> None:
        pass

    def wait_event(self, *_a, **_k) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def record_event(self, *_a, **_k):  # the dispatcher later calls event.synchronize()
        return self


def enable() -> int:
    """Apply patches 13-15; return how many (3)."""
    from megatron.core.tensor_parallel.layers import RowParallelLinear
    from megatron.core.transformer.moe import token_dispatcher as td

    td.MoEAlltoAllTokenDispatcher.cuda_dtoh_stream = _HostStream()
    torch.cuda.stream = lambda stream=None: contextlib.nullcontext()

    to_host = td.maybe_move_tensor_to_cpu

    def move(tensor, as_numpy=False, record_stream=False):
        if torch.is_tensor(tensor) and not tensor.is_cuda:
            return tensor.numpy() if as_numpy else tensor
        return to_host(tensor, as_numpy=as_numpy, record_stream=record_stream)

    td.maybe_move_tensor_to_cpu = move

    forward = RowParallelLinear.forward

    def row_forward(self, *args, **kwargs):
        output, bias = forward(self, *args, **kwargs)
        return (output.clone() if self.is_expert and bias is not None else output), bias

    RowParallelLinear.forward = row_forward
    return 3
