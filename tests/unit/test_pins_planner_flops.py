"""The FLOPs and parameter arithmetic the planner's predictions rest on (benchmarks/costs.py and
the cost models), pinned against sums written out here: a defect in them moves every predicted
time and memory figure of `mlperf plan`. Found unpinned by bench/mutation.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import benchmarks
from benchmarks.gpt3.config import Gpt3Config
from benchmarks.llama2_70b_lora.config import Llama2LoraConfig
from harness import planner
from harness.planner import params as P
from harness.planner import workloads as W


def test_gpt3_forward_flops_per_sequence():
    """Narayanan et al. 2021 eq. 3 without recomputation, per token: 2 x the matmul weights of the
    L layers (4h^2 + 2hf each), attention 4 s h per layer, the logits 2 V h; times s tokens."""
    L, h, f, s, V = 2, 64, 256, 64, 256  # configs/tiny.yaml's model
    per_token = 2 * L * (4 * h * h + 2 * h * f) + 4 * L * s * h + 2 * V * h  # 196608 + 32768 + 32768
    cfg = Gpt3Config(
        num_layers=L,
        hidden_size=h,
        num_attention_heads=4,
        ffn_hidden_size=f,
        max_sequence_length=s,
        vocab_size=V,
        global_batch_size=16,
    )
    w = W.get(benchmarks.get("gpt3"), cfg, "tiny")
    assert w.fwd_flops_per_sample == per_token * s == 16_777_216
    assert w.flops_per_sample == 3 * 16_777_216  # backward: gradients of activations and weights, 2x forward
    full = W.get(benchmarks.get("gpt3"))  # 175B: L 96, h 12288, f 49152, s 2048, V 50257
    per_token = 2 * 96 * (4 * 12288**2 + 2 * 12288 * 49152) + 4 * 96 * 2048 * 12288 + 2 * 50257 * 12288
    assert full.fwd_flops_per_sample == per_token * 2048 == pytest.approx(7.348e14, rel=1e-3)


SMALL_LLAMA = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,  # head 16
    "num_key_value_heads": 2,  # K/V width 32
    "num_layers": 2,
    "vocab_size": 256,
    "lora_rank": 4,
    "max_sequence_length": 128,
}
# One layer's frozen base: qkv_proj (64 + 2 x 32) x 64 = 8192, o_proj 4096, gate/up/down 3 x 8192,
# two RMSNorms 128 -> 36992; the model: embed 256 x 64 + 2 layers + final norm 64 + lm_head 16384
BASE = 16384 + 2 * 36992 + 64 + 16384
# LoRA on qkv_proj and o_proj: A [r, in] + B [out, r] = 4x64 + 128x4 + 4x64 + 64x4 = 1280 a layer
LORA = 2 * 1280


def test_llama2_lora_parameters_and_flops():
    cfg = Llama2LoraConfig(**SMALL_LLAMA)
    assert (BASE, LORA) == (106_816, 2_560)
    want = {"total": BASE + LORA, "trainable": LORA, "base": BASE}
    got = P.parameters(benchmarks.get("llama2_70b_lora"), cfg)
    assert got == want and all(type(v) is int for v in got.values())  # counts, printed with `:,`
    w = W.get(benchmarks.get("llama2_70b_lora"), cfg, "tiny")
    s, L, h = 128, 2, 64
    # frozen base: forward 2N per token, backward only activation gradients (2N); causal flash
    # attention 2 s^2 h per layer forward, 3x that with its backward
    assert w.fwd_flops_per_sample == 2 * BASE * s + 2 * L * s * s * h
    assert w.flops_per_sample == 4 * BASE * s + 6 * L * s * s * h


def test_fsdp_gives_rank_0_whole_rows():
    """FSDP2 splits each tensor on dim 0 in chunks of ceil(dim0 / world): over 3 ranks rank 0 holds
    ceil(4/3) = 2 rows of lora_A [4, 64], ceil(128/3) = 43 of qkv's lora_B [128, 4], ceil(64/3) = 22 of
    o_proj's lora_B [64, 4]: 128 + 172 + 128 + 88 = 516 adapter elements a layer, not 1280 / 3."""
    cfg = Llama2LoraConfig(**SMALL_LLAMA, fsdp=True)
    got = P.rank_bytes(benchmarks.get("llama2_70b_lora"), cfg, {"dp": 3})
    lora = 2 * 516
    assert got["gradients"] == 4 * lora  # fp32, 2 layers
    assert got["optimizer"] == 8 * lora  # AdamW m, v
    # the frozen base the same way: embed and lm_head ceil(256/3) = 86 rows of 64 each; a layer's
    # qkv (128 rows), o (64), gate, up (128), down (64 rows of 128), two norms (64 rows of 1):
    # 43x64 + 22x64 + 2 x 43x64 + 22x128 + 2 x 22 = 12524; the final norm 22
    base = 2 * 86 * 64 + 2 * 12524 + 22
    assert got["parameters_rank"] == base + lora == 37_110
    assert got["weights"] == 2 * base + 4 * lora  # bf16 base, fp32 adapters
    assert got["fsdp_gathered"] == 2 * 36992 * 2  # the running and the prefetched layer, whole, bf16
    two = P.rank_bytes(benchmarks.get("llama2_70b_lora"), cfg, {"dp": 2})
    assert two["fsdp_gathered"] == 2 * 36992 * 2 and two["gradients"] == 4 * LORA / 2


def test_untied_embeddings_per_pipeline_stage():
    """Llama 2 70B, record layout TP 2 PP 4: the input embedding on the first stage, the output one
    on the last, the layers split evenly, everything over TP: ((N - 2 V h) / PP + V h) / TP."""
    w = W.get(benchmarks.get("llama2_70b_lora"))
    n, emb = 68_976_648_192 + 44_564_480, 32000 * 8192
    assert w.params_per_stage(2, 4) == pytest.approx(((n - 2 * emb) / 4 + emb) / 2, rel=1e-12)
    # (at PP 2 the embeddings weigh the same as a share of layers: (n - 2 emb) / 2 + emb = n / 2)


def test_a_layout_without_degrees_is_one_rank():
    """rank_bytes takes anything with tp/pp/vp/cp/dp; what is missing, None or 0 is 1."""
    cfg = Gpt3Config(
        num_layers=2,
        hidden_size=64,
        num_attention_heads=4,
        ffn_hidden_size=256,
        vocab_size=256,
        global_batch_size=16,
    )
    n = P.parameters(benchmarks.get("gpt3"), cfg)["total"]
    one = {
        "parameters_rank": n,
        "weights": 2 * n,
        "gradients": 4 * n,
        "optimizer": 12 * n,
    }  # bf16, not sharded
    for layout in (None, {}, {"tp": None, "dp": 0, "cp": None}, SimpleNamespace(tp=1)):
        assert P.rank_bytes(benchmarks.get("gpt3"), cfg, layout) == one, layout


def test_a_cost_model_without_evaluations_or_checkpoints_prices_none():
    """The defaults of benchmarks.costs.Cost (tests/fake_benchmark's cost model keeps them): no
    evaluation and no resumable-checkpoint time in the prediction."""
    from tests.fake_benchmark import BENCHMARK

    with benchmarks.scratch():
        benchmarks.register(BENCHMARK)
        best = planner.plan(BENCHMARK, "dgx-h100x8").options[0]
    assert best.candidate.impl == "harness"
    assert best.time["eval_s"] == 0 and best.time["evals"] == 0
    assert best.time["predicted_min"] == pytest.approx(
        best.time["steps"] * best.time["step_s"] / 60, rel=1e-12
    )


def test_llama2_lora_activations_by_recompute_mode():
    """LoRA keeps no inputs of frozen linears: 24 B per token per hidden unit a layer, 10 with
    selective recompute, 2 with full (+ one layer's 24 while it is recomputed)."""
    from harness.planner import memory as M

    w = W.get(benchmarks.get("llama2_70b_lora"), Llama2LoraConfig(**SMALL_LLAMA), "tiny")
    hw = planner.resolve_hardware("dgx-h100x1")
    k = {"memory_overhead_gib": 0.0, "memory_slack": 0.0}
    tokens_h = 128 * 64  # MBS 1 x s 128 tokens, h 64; TP 1, PP 1: both layers in flight
    for rc, per in (("none", 24 * 2), ("selective", 10 * 2), ("full", 2 * 2 + 24)):
        got = M.estimate(w, M.Candidate(mbs=1, gbs=8, fp8=False, recompute=rc), hw, k)
        assert got["activations"] * 2**30 == pytest.approx(per * tokens_h), rc


def test_llama2_lora_evaluations_and_context_parallel_choices():
    """The closed rules: evaluate every ceil(384 / GBS) steps, skipping the first
    floor(0.125 GBS + 2); at GBS 8, 3178.67 samples to converge: 3178 // 384 = 8 - 3 = 5."""
    from harness.planner import stacks

    plan = planner.plan(
        benchmarks.get("llama2_70b_lora"),
        "dgx-h100x8",
        global_batch_size=8,
        stack=stacks.parse("nvidia-ngc@24.04"),
    )
    best = plan.options[0]
    assert best.time["samples_to_converge"] == pytest.approx(3178.6667, rel=1e-6)
    assert best.time["evals"] == 5
    assert {o.candidate.cp for o in plan.options} == {1, 2, 4, 8}  # NVIDIA's CP choices
    # a run too short to get past the skipped evaluations has none (not -1, not 1), of 173 samples
    cost, w = plan.workload.cost, plan.workload
    assert cost.evals(w, 1000, 8) == (0, 173) and cost.evals(w, 3178.67, 8) == (5, 173)
