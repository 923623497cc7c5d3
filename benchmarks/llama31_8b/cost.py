"""Llama 3.1 8B's cost model: megatron-core GPTModel with the Llama layer (reference_impls/
megatron_gpt/llama31.py) as the Megatron-GPT family builds and shards it; the bytes per rank are
the family's (benchmarks/gpt3/cost.py: bf16 weights, fp32 grad buffer, distributed optimizer).

Per layer, TP-sharded: QKV h x (h + 2 kv) with kv = num_query_groups x head width (GQA), the
output projection h x h, the SwiGLU fc1 2f x h and fc2 f x h; two RMSNorm weights replicated; no
biases. Untied embeddings: the word embedding on the first stage, the output layer on the last.
At the reference shape: 32 x 218,112,000 + 2 x 128,256 x 4,096 + 4,096 = 8,030,261,248.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from benchmarks.costs import Recompute, Workload
from benchmarks.gpt3.cost import Gpt3Cost
from benchmarks.llama31_8b.config import Llama31Config
from benchmarks.megatron_gpt import MegatronGptConfig

LEARNING_RATES = {16: 4.0e-4, 32: 8.0e-4, 64: 8.0e-4, 96: 1.0e-3, 128: 2.0e-3}
"""The RCPs' base LR per GBS (rcps_llama31_8b.json, 5.1.0-6.1.0): the planner proposes the
nearest at or below its GBS."""


@cache
def _stages(shape: tuple, tp: int, pp: int) -> tuple[int, ...]:
    layers, h, heads, groups, f, vocab = shape
    kv = groups * (h // heads)
    layer = (h * (h + 2 * kv) + h * h + 2 * f * h + f * h) // tp + 2 * h
    vocab = -(-vocab // tp)
    per_stage = [layers // pp * layer for _ in range(pp)]
    per_stage[0] += vocab * h  # word embedding (RoPE has no position table)
    per_stage[-1] += h + vocab * h  # final RMSNorm and the untied output layer
    return tuple(per_stage)


def layer_fwd_flops(cfg: Llama31Config) -> int:
    """Forward FLOPs of one sequence through one layer: 2 x its matmul parameters per token plus
    causal-agnostic attention scores and values, 4 x seq x h per token (as dense_transformer_fwd_flops)."""
    h, s, f = cfg.hidden_size, cfg.max_sequence_length, cfg.ffn_hidden_size
    kv = cfg.num_query_groups * (h // cfg.num_attention_heads)
    return s * (2 * (h * (h + 2 * kv) + h * h + 3 * f * h) + 4 * s * h)


class Llama31Cost(Gpt3Cost):
    # SwiGLU keeps both branches' inputs: more bytes per token than GPT's GELU MLP.
    RECOMPUTE = {"none": Recompute(38, 0.0), "selective": Recompute(30, 0.05), "full": Recompute(2, 1 / 3)}
    MBS_CHOICES = (1, 2)
    CP_CHOICES = (1, 2, 4)

    def stages(self, cfg: Any, tp: int = 1, pp: int = 1) -> list[int]:
        shape = (
            cfg.num_layers,
            cfg.hidden_size,
            cfg.num_attention_heads,
            cfg.num_query_groups,
            cfg.ffn_hidden_size,
            cfg.vocab_size,
        )
        return list(_stages(shape, tp, pp))

    def fwd_flops(self, cfg: MegatronGptConfig) -> float:
        assert isinstance(cfg, Llama31Config)
        s = cfg.max_sequence_length
        return cfg.num_layers * layer_fwd_flops(cfg) + s * 2 * cfg.vocab_size * cfg.hidden_size

    def kv_fraction(self, cfg: MegatronGptConfig) -> float:
        assert isinstance(cfg, Llama31Config)
        return cfg.num_query_groups / cfg.num_attention_heads

    def evals(self, w: Workload, samples: float, gbs: int) -> tuple[float, float]:
        every = math.ceil(w.cfg.eval_interval_samples / gbs) * gbs
        return samples // every, w.cfg.eval_samples  # eval_samples counts sequences

    def samples_per_rcp_unit(self, gbs: int, ruleset: str) -> float:
        return 1.0  # the RCPs count sequences

    def learning_rate(self, w: Workload, gbs: int) -> float | None:
        if w.size != "full":
            return None
        at_or_below = [g for g in LEARNING_RATES if g <= gbs]
        return LEARNING_RATES[max(at_or_below)] if at_or_below else LEARNING_RATES[min(LEARNING_RATES)]


COST = Llama31Cost()
