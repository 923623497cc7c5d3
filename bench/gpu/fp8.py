"""FP8 matmuls through PyTorch's own `torch._scaled_mm`, for GPUs without Transformer Engine.

`Fp8Linear` is an `nn.Linear` whose matmuls run in FP8 with per-tensor dynamic scaling (each tensor
scaled by fp8_max / amax just before the cast): activations and weights in e4m3 for the forward,
output gradients in e5m2 for the backward (the "hybrid" format TE and NVIDIA's MLPerf configs use).
Weight gradients are only computed for trainable weights, so a frozen LoRA base costs two FP8
matmuls, not three. Outputs and gradients keep the dtype of the input and the weight (bf16 on the GPU).

`torch._scaled_mm` wants the first operand row-major and the second column-major, and on CUDA every
dimension a multiple of 16; the transposed copies below are what TE's fused cast-transpose avoids, so
this path is a floor for FP8 speed, not NVIDIA's figure.
"""

from __future__ import annotations

import torch
from torch import nn

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def _quantize(t: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(t scaled into dtype's range and cast, the inverse scale that `_scaled_mm` multiplies back)."""
    top = torch.finfo(dtype).max
    amax = t.detach().abs().amax().float().clamp(min=1e-12)
    scale = top / amax
    # clamp: t * scale rounds in t's dtype and can land past the fp8 maximum, where the cast gives NaN;
    # contiguous: `_scaled_mm` wants its first operand row-major, and a gradient can arrive transposed.
    return (t * scale).clamp(-top, top).to(dtype).contiguous(), scale.reciprocal()


def _col_major(t: torch.Tensor) -> torch.Tensor:
    return t.t().contiguous().t()


class _Fp8Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        xq, xs = _quantize(x, E4M3)
        wq, ws = _quantize(weight, E4M3)
        ctx.save_for_backward(xq, xs, wq, ws)
        ctx.dtypes = x.dtype, weight.dtype
        return torch._scaled_mm(xq, wq.t(), scale_a=xs, scale_b=ws, out_dtype=x.dtype)

    @staticmethod
    def backward(ctx, grad):
        xq, xs, wq, ws = ctx.saved_tensors
        gq, gs = _quantize(grad, E5M2)
        x_dtype, w_dtype = ctx.dtypes
        gx = gw = None
        if ctx.needs_input_grad[0]:  # dX = dY W: (M, N) x (N, K)
            gx = torch._scaled_mm(gq, _col_major(wq), scale_a=gs, scale_b=ws, out_dtype=x_dtype)
        if ctx.needs_input_grad[1]:  # dW = dY^T X: (N, M) x (M, K)
            gw = torch._scaled_mm(
                gq.t().contiguous(), _col_major(xq), scale_a=gs, scale_b=xs, out_dtype=w_dtype
            )
        return gx, gw


class Fp8Linear(nn.Linear):
    """Drop-in `nn.Linear` (same parameters) computing its matmuls in FP8 through `_scaled_mm`."""

    @classmethod
    def from_linear(cls, lin: nn.Linear) -> Fp8Linear:
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.in_features, new.out_features = lin.in_features, lin.out_features
        new.weight, new.bias = lin.weight, lin.bias
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        y = _Fp8Matmul.apply(x.reshape(-1, shape[-1]), self.weight)
        y = y.reshape(*shape[:-1], self.out_features)
        return y + self.bias if self.bias is not None else y


def swap_linears(module: nn.Module, keep=lambda name, lin: False) -> int:
    """Replace every `nn.Linear` under `module` (except where `keep(name, lin)`) by an Fp8Linear
    sharing its parameters; returns how many were replaced."""
    swapped = 0
    for name, child in list(module.named_modules()):
        for attr, lin in list(child.named_children()):
            full = f"{name}.{attr}" if name else attr
            if type(lin) is nn.Linear and not keep(full, lin):
                setattr(child, attr, Fp8Linear.from_linear(lin))
                swapped += 1
    return swapped
