"""Parameters of the Megatron-GPT family's mixture-of-experts models (gpt_oss_20b, deepseekv3_671b),
counted as megatron-core 0.19.2 builds GPTModel with its MoE layer, per TP rank and pipeline stage,
the dense part and the routed experts apart (benchmarks/moe_cost.py prices them; each benchmark's
cost.py shows the sums at its full size).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from benchmarks.megatron_moe import MegatronMoeConfig


def _pad(vocab: int, multiple: int, tp: int) -> int:
    """Embedding rows per TP rank: megatron pads the vocabulary to a multiple of `multiple` x TP."""
    m = multiple * tp
    return -(-vocab // m) * m // tp


def attention(c: MegatronMoeConfig, tp: int) -> int:
    """One layer's attention parameters on one TP rank, with its input norm."""
    h, heads, bias = c.hidden_size, c.num_attention_heads, c.add_bias_linear
    if c.multi_latent_attention:
        q_head = c.qk_head_dim + c.qk_pos_emb_head_dim
        if c.q_lora_rank:  # down (replicated) + its norm, then up (column parallel)
            q = h * c.q_lora_rank + c.q_lora_rank + c.q_lora_rank * heads * q_head // tp
        else:
            q = h * heads * q_head // tp
        kv_down = h * (c.kv_lora_rank + c.qk_pos_emb_head_dim) + c.kv_lora_rank  # + kv norm
        kv_up = c.kv_lora_rank * heads * (c.qk_head_dim + c.v_head_dim) // tp
        proj = heads * c.v_head_dim * h // tp
        return q + kv_down + kv_up + proj + h  # + input norm
    d, kv = c.head_dim, c.num_query_groups * c.head_dim
    qkv = h * (heads * d + 2 * kv) + (heads * d + 2 * kv if bias else 0)
    proj = heads * d * h
    sinks = heads if c.attention_sinks else 0  # one learned softmax offset per head
    return (qkv + proj + sinks) // tp + (h if bias else 0) + h  # row-parallel bias, input norm


def swiglu(h: int, f: int, bias: bool, tp: int = 1) -> int:
    """A SwiGLU MLP on one TP rank: fc1 (gate and up, column parallel) 2f x h, fc2 (row parallel)
    h x f, their biases (fc2's replicated)."""
    return (3 * h * f + (2 * f if bias else 0)) // tp + (h if bias else 0)


def dense_mlp(c: MegatronMoeConfig, tp: int, moe: bool) -> int:
    """One layer's non-routed MLP part on one TP rank, with the pre-MLP norm: a dense SwiGLU, or
    the router (replicated: E x h, + E biases) and the shared expert (TP-split)."""
    h = c.hidden_size
    if not moe:
        return swiglu(h, c.ffn_hidden_size, c.add_bias_linear, tp) + h
    router = c.num_moe_experts * h + (c.num_moe_experts if c.add_bias_linear else 0)
    fs = c.moe_shared_expert_intermediate_size
    shared = swiglu(h, fs, c.add_bias_linear, tp) if fs else 0
    return router + shared + h


def experts(c: MegatronMoeConfig) -> int:
    """One MoE layer's routed experts (all of them)."""
    return c.num_moe_experts * swiglu(c.hidden_size, c.moe_ffn_hidden_size, c.add_bias_linear)


_SHAPE = (
    "hidden_size num_layers num_attention_heads num_query_groups kv_channels ffn_hidden_size vocab_size "
    "make_vocab_size_divisible_by add_bias_linear attention_sinks multi_latent_attention q_lora_rank "
    "kv_lora_rank qk_head_dim qk_pos_emb_head_dim v_head_dim num_moe_experts moe_ffn_hidden_size "
    "moe_shared_expert_intermediate_size moe_first_dense_layers mtp_num_layers "
    "pipeline_split_counts_embedding_and_loss"
).split()
"""The fields the parameter count depends on (a config seen through the planner's overlay too)."""


def _shape(c: MegatronMoeConfig) -> tuple:
    return tuple(getattr(c, f) for f in _SHAPE)


@cache
def _stages(c: MegatronMoeConfig, tp: int, pp: int, ep: int) -> tuple[tuple[int, int], ...]:
    """(dense, routed-expert) parameters on one rank of each pipeline stage: the pipeline units
    (MegatronMoeConfig.pipeline_units: layers, and where the config says so the embedding, MTP and
    loss as one unit each) split evenly; the embedding on the first stage, the untied output layer
    and final norm (and MTP) on the last."""
    h = c.hidden_size
    rows = _pad(c.vocab_size, c.make_vocab_size_divisible_by, tp) * h
    units = c.pipeline_units()
    per = len(units) // pp
    out = []
    for s in range(pp):
        dense = exp = 0
        for u in units[s * per : (s + 1) * per if s < pp - 1 else len(units)]:
            if isinstance(u, int):  # transformer layer u
                moe = u >= c.moe_first_dense_layers
                dense += attention(c, tp) + dense_mlp(c, tp, moe)
                exp += experts(c) // ep if moe else 0
        out.append([dense, exp])
    out[0][0] += rows  # word embedding (RoPE: no position table)
    out[-1][0] += rows + h  # untied output layer, final norm
    # MTP (with the output layer): two norms, the 2h -> h projection, one MoE layer, its final norm
    for _ in range(c.mtp_num_layers):
        out[-1][0] += 2 * h + 2 * h * h // tp + attention(c, tp) + dense_mlp(c, tp, True) + h
        out[-1][1] += experts(c) // ep
    if c.mtp_num_layers and pp > 1:  # MTP embeds its input on the last stage: a copy of the
        out[-1][0] += rows  # word embedding there, kept equal to the first stage's (as tied ones are)
    return tuple((d, e) for d, e in out)


class _Key:
    """A config hashed by its shape, so `_stages` caches per shape (configs are not hashable)."""

    def __init__(self, c: Any):
        self.c, self.k = c, _shape(c)

    def __hash__(self):
        return hash(self.k)

    def __eq__(self, other):
        return isinstance(other, _Key) and self.k == other.k

    def __getattr__(self, name):
        return getattr(self.__dict__["c"], name)


def split(cfg: Any, tp: int = 1, pp: int = 1, ep: int = 1) -> list[tuple[int, int]]:
    """(dense, routed-expert) parameters on one rank of each pipeline stage."""
    # pyrefly: ignore[bad-argument-type]  (_Key stands in for the config: same attributes)
    return list(_stages(_Key(cfg), tp, pp, ep))
