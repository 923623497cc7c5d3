"""Model FLOPs of the measured layers and the datasheet peaks that MFU divides by.

Convention (Megatron-LM, Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
Clusters", eq. 3): a matmul of (m x k) by (k x n) is 2mkn FLOPs; the backward pass costs twice the
forward; attention scores and the weighted sum count the full s x s square (no causal discount); no
recompute is counted (model FLOPs, not hardware FLOPs). Norms, softmax and elementwise work are left
out. tests/unit/test_gpu_check.py holds these formulas against torch.utils.flop_counter.
"""

from __future__ import annotations

# The peaks come from systems/*.yaml (`accelerator.peak_tflops`, dense, no sparsity), whose numbers
# are NVIDIA's datasheets: H100 SXM5 and H200 SXM (same Hopper chip and clocks) list BF16 1,979 and
# FP8 3,958 TFLOP/s "with sparsity"; dense is half, 989.4 and 1978.9
# (https://www.nvidia.com/en-us/data-center/h100/, https://www.nvidia.com/en-us/data-center/h200/).
# A GPU not matched here gets no MFU (the figure says so) rather than a guessed peak.
PEAK_SYSTEMS = (("H200", "dgx-h200x1"), ("H100 80GB HBM3", "dgx-h100x1"), ("H100 SXM", "dgx-h100x1"))


def system_for_gpu(name: str) -> str | None:
    """The shipped 8-GPU system whose accelerator is this GPU (`torch.cuda.get_device_name()`)."""
    if "NVL" in name or "PCIe" in name:  # other clocks and power: other peaks
        return None
    return next((system for key, system in PEAK_SYSTEMS if key in name), None)


def peak_tflops(gpu_name: str) -> dict[str, float]:
    """{'bf16': ..., 'fp8': ...} dense datasheet peaks for this GPU, {} when unknown."""
    system = system_for_gpu(gpu_name)
    if system is None:
        return {}
    from harness.resolve import systems

    return dict(systems.load(system).accelerator.peak_tflops)


def gpt_layer_flops(batch: int, seq: int, hidden: int, ffn: int) -> float:
    """Forward + backward of one GPT decoder layer (QKV, attention, projection, 2-matmul MLP)."""
    tokens = batch * seq
    linear = 2 * tokens * (3 * hidden * hidden + hidden * hidden + 2 * hidden * ffn)
    attention = 2 * 2 * batch * seq * seq * hidden  # Q K^T and P V
    return 3.0 * (linear + attention)


def attention_flops(batch: int, seq: int, width: int) -> float:
    """Forward + backward of the two attention matmuls (width = query heads x head dim)."""
    return 3.0 * 2 * 2 * batch * seq * seq * width


def linear_flops(module, tokens: int) -> float:
    """Forward + backward of every `nn.Linear` in `module` over `tokens` rows: 3x the forward for a
    trained weight, 2x for a frozen one (input gradient only), as in a LoRA layer."""
    from torch import nn

    total = 0.0
    for m in module.modules():
        if isinstance(m, nn.Linear):
            passes = 3 if m.weight.requires_grad else 2
            total += passes * 2.0 * tokens * m.in_features * m.out_features
    return total


def mfu(flops: float, seconds: float, peak_tflops_value: float | None) -> float | None:
    if not peak_tflops_value or seconds <= 0:
        return None
    return flops / seconds / (peak_tflops_value * 1e12)


def flux_block_flops(batch: int, tokens: int, dim: int, single: bool) -> float:
    """Forward + backward of one FLUX.1 block (diffusers FluxTransformerBlock / FluxSingleTransformerBlock)
    over `tokens` joint tokens (image + text), width `dim` = heads x head dim: per token 24 dim^2 of
    linears in either kind (double: each stream's Q, K, V, output projection and 4 x dim GELU MLP;
    single: Q, K, V, the 4 x dim MLP in and the fused (dim + 4 dim) -> dim out), the joint attention
    4 tokens^2 dim, and per sample the AdaLN modulation (double: two dim -> 6 dim; single: dim -> 3 dim)."""
    d, n = dim, tokens
    modulation = 2 * d * 3 * d if single else 2 * (2 * d * 6 * d)
    return 3.0 * batch * (modulation + 24 * n * d * d + 4 * n * n * d)
