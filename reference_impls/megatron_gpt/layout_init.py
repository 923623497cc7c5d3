"""A mixture of experts' initial weights, the same at every layout (TP, PP, VP, EP).

megatron-core draws weights from each rank's RNG stream in build order: a rank's local experts
come from its own stream (at EP 2 the second rank's first expert draws what expert 0 draws), and
with use_cpu_initialization (the CPU path) full tensors come from one host stream that every
expert and every earlier stage's layer advances. So the model at EP 2 or PP 2 was not the model
of one process (the tiny gpt-oss's first eval moved by 1.2 %). Here each weight is drawn again from
a generator keyed by (seed, its global name: layer numbers across stages, experts by global index),
with megatron's own init method for it, as the full tensor, and this rank keeps its TP slice (as
megatron's CPU init slices, strides included). A run's model then does not depend on its layout,
and layouts compare curve to curve (tests/integration/test_gpt_oss_tiny.py).

On a GPU (no CPU initialization) only the experts are drawn again: the dense weights come from
megatron's RNG tracker, as in Megatron-LM.
"""

from __future__ import annotations

import hashlib
import re

import torch

_LOCAL_EXPERT = re.compile(r"\.experts\.local_experts\.(\d+)\.")
_GROUPED_EXPERT = re.compile(r"\.experts\.(linear_fc[12])\.weight(\d+)$")


def _init_method(name: str, p, config):
    """megatron's init for this parameter (None: a constant it leaves as built, norms and biases)."""
    grouped = _GROUPED_EXPERT.search(name)
    if name.endswith(("linear_proj.weight", "linear_fc2.weight")) or (
        grouped and grouped.group(1) == "linear_fc2"
    ):
        return config.output_layer_init_method  # the residual branch's output: scaled
    if name.startswith("embedding."):
        return config.embedding_init_method
    if name.endswith(("softmax_offset", "router.bias")) or p.dim() >= 2:
        return config.init_method  # sinks and the router's bias are drawn too (dot_product_attention, router)
    return None


def global_expert(name: str, first: int) -> str:
    """The name with the local expert index made global (first = this EP rank's first expert)."""
    name = _LOCAL_EXPERT.sub(lambda m: f".experts.local_experts.{first + int(m.group(1))}.", name)
    return _GROUPED_EXPERT.sub(lambda m: f".experts.{m.group(1)}.weight{first + int(m.group(2))}", name)


def tp_slice(full: torch.Tensor, p) -> torch.Tensor:
    """This TP rank's part of a full tensor, as megatron's _initialize_affine_weight_cpu takes it:
    `stride` interleaved pieces along partition_dim, every TP-th one (a GLU's gate and up halves)."""
    from megatron.core import parallel_state as ps

    tp = ps.get_tensor_model_parallel_world_size()
    if not getattr(p, "tensor_model_parallel", False) or tp == 1 or not getattr(p, "allreduce", True):
        return full
    dim, stride = p.partition_dim, getattr(p, "partition_stride", 1)
    pieces = torch.split(full, full.shape[dim] // (tp * stride), dim=dim)
    return torch.cat(pieces[ps.get_tensor_model_parallel_rank() :: tp], dim=dim)


def _full_shape(p) -> list[int]:
    from megatron.core import parallel_state as ps

    shape = list(p.shape)
    if getattr(p, "tensor_model_parallel", False) and getattr(p, "allreduce", True):
        shape[p.partition_dim] *= ps.get_tensor_model_parallel_world_size()
    return shape


def reinit(model, config, seed: int, names) -> int:
    """Draw `model`'s weights (one GPTModel chunk; `names`: its (global name, param) pairs, experts
    by global index: model._global_names) again; experts only unless their weights live on the
    host. Returns how many tensors were drawn."""
    drawn = 0
    for name, p in names:
        expert = not getattr(p, "allreduce", True)
        if p.device.type == "meta" or (p.device.type != "cpu" and not expert):
            continue
        init = _init_method(name, p, config)
        if init is None:
            continue
        key = f"{seed}:{name}"
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") >> 1)
            full = torch.empty(_full_shape(p), dtype=p.dtype)  # drawn on the host: any device agrees
            init(full)
            p.copy_(tp_slice(full, p))
        drawn += 1
    return drawn
