"""The routed experts' initial weights, the same at every expert-parallel layout.

megatron-core builds each rank's local experts one after another from the rank's RNG stream, so at
EP 2 the second rank's first expert draws what expert 0 draws, and the model at EP 2 is not the
model at EP 1 (the tiny gpt-oss's first eval moved by 1.2 %). The dense weights already agree
across TP (use_cpu_initialization makes full tensors and slices them). Here every expert weight is
drawn again, with megatron's own init method for it (fc1: init_method; fc2: the scaled
output_layer_init_method), from a generator keyed by (seed, layer, global expert, matrix): the
same weights wherever the expert lives, so layouts can be compared curve to curve
(tests/integration/test_gpt_oss_tiny.py) and a run's model does not depend on its EP.
"""

from __future__ import annotations

import torch


def _local_weights(experts, fc: str) -> list[torch.Tensor]:
    """The local experts' weights of one matrix: SequentialMLP (local spec: one MLP per expert) or
    TEGroupedMLP (weight0..weightN-1 in one grouped linear)."""
    if hasattr(experts, "local_experts"):
        return [getattr(e, fc).weight for e in experts.local_experts]
    linear = getattr(experts, fc)
    return [getattr(linear, f"weight{i}") for i in range(experts.num_local_experts)]


def reinit(model, config, seed: int) -> int:
    """Draw every local expert weight of `model` (one GPTModel chunk) from its (seed, layer,
    global expert, matrix) generator; returns how many tensors were drawn."""
    from megatron.core import parallel_state as ps

    ep_rank = ps.get_expert_model_parallel_rank()
    drawn = 0
    for layer in model.decoder.layers:
        experts = getattr(getattr(layer, "mlp", None), "experts", None)
        if experts is None:  # a dense layer (DeepSeek-V3's first three)
            continue
        first = ep_rank * experts.num_local_experts
        for which, (fc, init) in enumerate(
            (("linear_fc1", config.init_method), ("linear_fc2", config.output_layer_init_method))
        ):
            for i, weight in enumerate(_local_weights(experts, fc)):
                key = ((seed * 1_000_003 + layer.layer_number) * 65_537 + first + i) * 2 + which
                with torch.random.fork_rng(devices=[]), torch.no_grad():
                    torch.manual_seed(key % (2**63))
                    if weight.device.type == "cuda":  # draw on the host: the same numbers on any device
                        host = torch.empty(weight.shape, dtype=weight.dtype)
                        init(host)
                        weight.copy_(host)
                    elif weight.device.type != "meta":
                        init(weight)
                drawn += 1
    return drawn
