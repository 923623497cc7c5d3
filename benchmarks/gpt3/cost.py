"""GPT-3 175B's cost model: megatron-core GPTModel as reference_impls/gpt3 builds and shards it.

LayerNorm + biases, learned positions, tied embeddings; with PP the last stage holds its own copy
of the word embedding for the output layer. Weights in bf16 on GPU (`precision: bf16`), fp32 on
CPU; gradients in megatron's fp32 grad buffer (`grad_reduce_in_fp32=True`), full size on every rank
of the stage; optimizer: fp32 master copy (bf16 weights only) + Adam m and v, divided over DP x CP
by the distributed optimizer (megatron pads its buffers to a multiple of the group: < 0.01 %).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from benchmarks.costs import ADAM, BF16, FP32, Cost, Recompute, Workload, degrees, dense_transformer_fwd_flops
from benchmarks.gpt3.config import Gpt3Config
from benchmarks.megatron_gpt import MegatronGptConfig


def stages(cfg: Gpt3Config, tp: int = 1, pp: int = 1) -> list[int]:
    """Parameters of one TP rank of each pipeline stage (all its virtual chunks together)."""
    shape = (cfg.num_layers, cfg.hidden_size, cfg.ffn_hidden_size, cfg.vocab_size, cfg.max_sequence_length)
    return list(_stages(shape, tp, pp))


@cache  # the search asks per candidate layout: the same few (TP, PP) pairs thousands of times
def _stages(shape: tuple, tp: int, pp: int) -> tuple[int, ...]:
    layers, h, f, vocab, seq = shape
    # QKV and fc1 split by columns (weights and biases), proj and fc2 by rows (their biases and
    # both LayerNorms replicated on every TP rank)
    layer = (3 * h * h + 3 * h + h * h + h * f + f + f * h) // tp + 2 * h + 2 * h + h + h
    vocab = -(-vocab // tp)
    per_stage = [layers // pp * layer for _ in range(pp)]
    per_stage[0] += vocab * h + seq * h  # word + position embeddings
    per_stage[-1] += 2 * h  # final LayerNorm
    if pp > 1:  # output layer: the tied word embedding, copied to the last stage
        per_stage[-1] += vocab * h
    return tuple(per_stage)


class Gpt3Cost(Cost):
    """Also the Megatron-GPT family's accounting (benchmarks/llama31_8b/cost.py subclasses it for
    its own `stages` and workload): megatron DDP's fp32 grad buffer, the distributed optimizer."""

    def stages(self, cfg: Any, tp: int = 1, pp: int = 1) -> list[int]:
        return stages(cfg, tp, pp)

    def parameters(self, cfg: MegatronGptConfig) -> dict[str, int]:
        n = sum(self.stages(cfg))  # TP 1, PP 1: embeddings counted once where tied
        return {"total": n, "trainable": n}

    def rank_bytes(self, cfg: MegatronGptConfig, layout: Any, device: str = "cuda") -> dict[str, float]:
        lay = degrees(layout)
        stage = max(self.stages(cfg, lay["tp"], lay["pp"]))
        half = device != "cpu" and cfg.precision == "bf16"
        shard = lay["dp"] * lay["cp"] if cfg.distributed_optimizer else 1
        opt = (FP32 if half else 0) + ADAM  # master copy (bf16 weights only) + Adam m, v
        return {
            "parameters_rank": stage,
            "weights": stage * (BF16 if half else FP32),
            "gradients": stage * FP32,
            "optimizer": stage * opt / shard,
        }

    RECOMPUTE = {"none": Recompute(34, 0.0), "selective": Recompute(26, 0.05), "full": Recompute(2, 1 / 3)}
    """Activation bytes kept per token per hidden unit per layer, by recompute (a GELU GPT layer)."""
    MBS_CHOICES: tuple[int, ...] = (1, 2, 4)
    CP_CHOICES: tuple[int, ...] = (1, 2)

    def fwd_flops(self, cfg: MegatronGptConfig) -> float:
        """Forward FLOPs of one sequence (~0.73e15 at GPT-3's full size)."""
        return dense_transformer_fwd_flops(
            cfg.num_layers, cfg.hidden_size, cfg.ffn_hidden_size, cfg.max_sequence_length, cfg.vocab_size
        )

    def kv_fraction(self, cfg: MegatronGptConfig) -> float:
        """KV heads per query head (1: multi-head attention)."""
        return 1.0

    def workload(self, cfg: MegatronGptConfig, size: str) -> Workload:
        return Workload.fully_trained(
            self.fwd_flops(cfg),
            self.parameters(cfg)["total"],
            kind="model_parallel",
            precision="fp8",
            cfg=cfg,
            size=size,
            supports=("tp", "pp", "vp", "cp"),
            layers=cfg.num_layers,
            hidden=cfg.hidden_size,
            seq=cfg.max_sequence_length,
            vocab=cfg.vocab_size,
            kv_fraction=self.kv_fraction(cfg),
            recompute=self.RECOMPUTE,
            fp8_act_factor=0.8,
            mbs_choices=self.MBS_CHOICES,
            cp_choices=self.CP_CHOICES,
        )

    def params_per_stage(self, w: Workload, tp: int, pp: int) -> float:
        return max(self.stages(w.cfg, tp, pp))  # exact: embeddings, the output layer with PP

    def evals(self, w: Workload, samples: float, gbs: int) -> tuple[float, float]:
        c = w.cfg
        every = math.ceil(c.eval_interval_samples / gbs) * gbs
        # full size logs eval_samples in tokens (the reference's 11,590,004): / seq = sequences
        per = c.eval_samples / c.max_sequence_length if w.size == "full" else c.eval_samples
        return samples // every, per

    def samples_per_rcp_unit(self, gbs: int, ruleset: str) -> float:
        return 1 / 2048  # the RCPs count tokens: 1/2048 of a sequence

    def learning_rate(self, w: Workload, gbs: int) -> float | None:
        # The closed rules: 2e-5 up to GBS 3072, 3e-5 from 4096 (either in between; 2e-5 is the
        # one the RCPs below 4096 use).
        if w.size == "full":
            return 2.0e-5 if gbs < 4096 else 3.0e-5
        return None

    def policy(self, w: Workload, hw: Any, k: dict, impl: str) -> dict[str, Any]:
        # The harness's GPU memory model assumes the distributed optimizer (best_config sets it).
        return {"distributed_optimizer": True} if impl == "harness" and hw.kind != "cpu" else {}

    def harness_overrides(self, w: Workload, c: Any) -> dict[str, Any]:
        return {"distributed_optimizer": c.distributed_optimizer} if w.size == "full" else {}

    def run_overrides(self, w: Workload, c: Any) -> dict[str, Any]:
        # What the memory model assumed: the recompute the layout needs to fit, the distributed optimizer
        out: dict[str, Any] = {}
        if c.recompute != "none":
            out["activation_recompute"] = c.recompute
        if c.distributed_optimizer:
            out["distributed_optimizer"] = True
        return out


COST = Gpt3Cost()
