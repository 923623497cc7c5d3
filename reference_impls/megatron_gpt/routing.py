"""`run_dir/routing.jsonl`: how evenly each MoE layer's router spreads the tokens over its experts.

    routing = RoutingStats(model, run_dir if rt.is_rank0 else None, append=resumed)
    ...training steps (forward hooks count)...
    with routing.paused(): stepper.evaluate(...)     # evaluation tokens are not training load
    routing.write(step)                              # at each eval point: one line, counts reset

One JSON line per evaluation point:
    {"step": S, "layers": [{"layer": L, "tokens": [n per expert], "max_over_mean": r,
     "expert_bias_absmax": b or null}], "aux_loss": a or null}

Why: a router that sends most tokens to a few experts wastes the others (with EP their ranks wait
on the busiest one's) and trains them on little; `mlperf diagnose` reads the last line
(harness/review/diagnose/detectors.py, expert_load) and says when a layer's busiest expert got
>= 2x the mean.

What is counted: the tokens each expert was routed (`routing_map.sum(0)`; a token counts once per
expert of its top-k) by rank 0's routers since the previous line, in training steps only: paused
around evaluation, and only with grad enabled, so a layer under full activation recompute counts
once (megatron runs its first forward without grad and the recompute with it; megatron's own
expert-bias counter uses the same test). Rank 0's tokens are 1/DP of the batch (also 1/TP x CP
with sequence or context parallel), a fair sample of a shuffled batch: no collective at all. With
PP > 1 rank 0 holds the first stage's layers only; the other stages' layers are not recorded.
The counts stay tensors on the device (no host-device sync per step); the eval point, which syncs
anyway, converts them.

`layer` is megatron's global layer number (1-based; an MTP layer's is num_layers + its own).
`aux_loss`: megatron's load-balancing loss without its coefficient, as megatron's metrics tracker
recorded it per layer and microbatch, averaged over rank 0's MoE layers and microbatches since
the previous line; null when the aux loss is off (moe_aux_loss_coeff 0). This loop reports the
tracker nowhere else, so reading it here also clears it (megatron's own loop clears it per step).
`expert_bias_absmax`: the largest |expert_bias| (DeepSeek's aux-loss-free balancing), null without.

Nothing is hooked (no cost, no file) for a dense model (no routers), on ranks other than 0, and
with CUDA graphs (a captured layer replays without calling Python hooks: the counts would be wrong).
A resumed run appends, like timings.jsonl.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import torch

from harness.core.files import append_lines
from harness.core.runfolder import ROUTING_FILE

AUX_LOSS_METRIC = "load_balancing_loss"  # megatron's name for the aux loss type "aux_loss"


def _routers(model: list) -> list:
    from megatron.core.transformer.moe.router import TopKRouter

    return [m for chunk in model for m in chunk.modules() if isinstance(m, TopKRouter)]


def _graphed(cfg) -> bool:
    return getattr(cfg, "cuda_graph_impl", "none") != "none" or bool(getattr(cfg, "enable_cuda_graph", False))


class RoutingStats:
    def __init__(self, model: list, run_dir: str | Path | None, append: bool = False):
        self.on = True
        self._path = Path(run_dir) / ROUTING_FILE if run_dir is not None else None
        routers = _routers(model) if self._path is not None else []
        if routers and _graphed(routers[0].config):
            routers = []
        self._routers = routers
        self._counts: list[torch.Tensor | None] = [None] * len(routers)
        self._calls = [0] * len(routers)  # microbatches counted (a Python int: no sync)
        self._check_tail = append  # a killed attempt may have left a torn last line
        for i, r in enumerate(routers):
            r.register_forward_hook(self._hook(i))
        if routers and not append and self._path is not None:
            self._path.write_bytes(b"")

    @property
    def active(self) -> bool:
        return bool(self._routers)

    def _hook(self, i: int):
        def count(_module, _args, out) -> None:
            if not (self.on and torch.is_grad_enabled()):  # evaluation; a no-grad pre-recompute forward
                return
            with torch.no_grad():
                n = out[1].sum(0)  # routing_map [tokens, experts] (bool) -> tokens per expert
                acc = self._counts[i]
                if acc is None:
                    self._counts[i] = n.to(torch.int64)
                else:
                    acc += n
            self._calls[i] += 1

        return count

    @contextlib.contextmanager
    def paused(self):
        """No counting inside (evaluation)."""
        was, self.on = self.on, False
        try:
            yield
        finally:
            self.on = was

    @staticmethod
    def _layer_number(r) -> int:
        return int(r.layer_number) + (r.config.num_layers if getattr(r, "is_mtp_layer", False) else 0)

    def line(self, step: int) -> dict:
        """The record of the tokens counted since the previous one; resets the counts."""
        layers = []
        for i, r in enumerate(self._routers):
            acc = self._counts[i]
            tokens = acc.tolist() if acc is not None else [0] * r.config.num_moe_experts
            total = sum(tokens)
            bias = getattr(r, "expert_bias", None)
            layers.append(
                {
                    "layer": self._layer_number(r),
                    "tokens": tokens,
                    "max_over_mean": round(max(tokens) * len(tokens) / total, 4) if total else None,
                    "expert_bias_absmax": round(float(bias.abs().max()), 6) if bias is not None else None,
                }
            )
            if acc is not None:
                acc.zero_()
        layers.sort(key=lambda x: x["layer"])
        out = {"step": step, "layers": layers, "aux_loss": self._aux_loss()}
        self._calls = [0] * len(self._routers)
        return out

    def _aux_loss(self) -> float | None:
        from megatron.core.transformer.moe.moe_logging import get_moe_metrics_tracker

        entry = get_moe_metrics_tracker().metrics.get(AUX_LOSS_METRIC)
        calls = sum(self._calls)
        if entry is None or not calls:
            return None
        # values[layer - 1]: the sum over the microbatches of that layer's aux loss / coefficient
        idx = [self._layer_number(r) - 1 for r in self._routers]
        total = float(entry.values[idx].sum())
        entry.values.zero_()
        return round(total / calls, 6)

    def write(self, step: int) -> None:
        """Append the line for the tokens since the previous one (rank 0 with routers; else nothing)."""
        if self._path is None or not self._routers:
            return
        append_lines(self._path, (json.dumps(self.line(step)) + "\n").encode(), after_torn=self._check_tail)
        self._check_tail = False
