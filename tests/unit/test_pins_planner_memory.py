"""The memory `mlperf plan` predicts per accelerator (harness/planner/memory.py), part by part,
pinned against arithmetic done here by hand for a small GPT: the record implementations' Megatron
accounting (bf16 weights 2 B; gradients 2 B with the distributed optimizer, 4 B without; fp32
master copy + Adam m and v = 12 B per trainable parameter, divided over DP x CP by the distributed
optimizer), activations per layer and microbatch in flight, logits, the framework's share.

Each part is what decides whether a layout fits: a defect that shrinks one (optimizer state cut to
a third, fewer microbatches in flight, a sequence not split over CP) makes the planner offer a
layout that runs out of memory. The numbers below are written out, not computed by the planner's
own helpers, so the same defect anywhere on the way (cost model, memory model) fails here.
"""

from __future__ import annotations

import pytest

import benchmarks
from benchmarks.gpt3.config import Gpt3Config
from harness import planner
from harness.planner import memory as M
from harness.planner import workloads as W

GIB = 2**30
K = {"memory_overhead_gib": 3.0, "memory_slack": 0.05}  # CUDA context etc.; 5 % allocator slack

# A small GPT: L 4 layers, hidden h 64, ffn f 256, vocabulary V 256, sequence s 64 (tiny.yaml's model
# with 4 layers instead of 2)
L, H, F, V, S = 4, 64, 256, 256, 64
CFG = Gpt3Config(
    num_layers=L,
    hidden_size=H,
    num_attention_heads=4,
    ffn_hidden_size=F,
    max_sequence_length=S,
    vocab_size=V,
    make_vocab_size_divisible_by=1,
    global_batch_size=8,
    micro_batch_size=1,
)
# Parameters of one layer on one of TP 2 ranks (Megatron: QKV and fc1 split by columns with their
# biases, proj and fc2 by rows, their biases and both LayerNorms replicated):
#   QKV (3h*h + 3h)/2 = 6240, proj h*h/2 + h = 2112, fc1 (f*h + f)/2 = 8320, fc2 h*f/2 + h = 8256,
#   LayerNorms 2 * 2h = 256  ->  25184
LAYER_TP2 = (3 * H * H + 3 * H) // 2 + H * H // 2 + H + (F * H + F) // 2 + H * F // 2 + H + 4 * H
assert LAYER_TP2 == 25184
# the same on one of TP 8 ranks
LAYER_TP8 = (3 * H * H + 3 * H) // 8 + H * H // 8 + H + (F * H + F) // 8 + H * F // 8 + H + 4 * H
# PP 2: the first stage has 2 layers + word embedding (V/2 rows of h) + positions (s x h):
#   2 * 25184 + 128 * 64 + 64 * 64 = 62656; the last stage 2 layers + final LayerNorm + the output
#   layer's copy of the word embedding = 58688: the first stage is the busiest rank
STAGE_TP2_PP2 = 62656
# The whole model on one rank (TP 1, PP 1; embeddings tied): 4 layers of 12h^2 + 13h, V*h, s*h, 2h
WHOLE = L * (12 * H * H + 13 * H) + V * H + S * H + 2 * H
assert WHOLE == 220544


def _hw():
    hw = planner.resolve_hardware("dgx-h100x1")  # one node of 8 H100s
    assert (hw.world, hw.kind) == (8, "gpu")
    return hw


def _bytes(cfg=CFG, **cand) -> dict[str, float]:
    """Bytes per accelerator by part as the planner predicts them (it answers in GiB)."""
    w = W.get(benchmarks.get("gpt3"), cfg, "tiny")
    cand = {"mbs": 1, "gbs": 8, "fp8": False, **cand}
    return {k: v * GIB for k, v in M.estimate(w, M.Candidate(**cand), _hw(), K).items()}


def test_tp2_pp2_dp2_with_the_distributed_optimizer():
    got = _bytes(tp=2, pp=2)  # 8 GPUs / (TP 2 x PP 2) = DP 2
    n = STAGE_TP2_PP2
    # activations: 34 B per token per hidden unit per layer (Korthikanti et al.), / TP:
    #   34 * (1 x 64 tokens) * 64 / 2 = 69632 B per layer-microbatch; GA = 8 / (DP 2 x MBS 1) = 4,
    #   1F1B keeps min(GA, PP) = 2 microbatches of L/PP = 2 layers in flight: x 4
    acts = 34 * 64 * 64 / 2 * 4
    logits = 64 * V * 4 / 2  # fp32 logits of one microbatch on the last stage, / TP
    want = {
        "weights": 2 * n,  # bf16
        "gradients": 2 * n,  # bf16, reduce-scattered into the distributed optimizer
        "optimizer": 12 * n / 2,  # fp32 master 4 + Adam m 4 + v 4, over DP 2
        "activations": acts,
        "logits": logits,
    }
    assert list(want.values()) == [125312, 125312, 375936, 278528, 32768]  # the figures, written out
    want["framework"] = 3.0 * GIB + 0.05 * sum(want.values())
    assert got == pytest.approx(want, rel=1e-12)


def test_without_the_distributed_optimizer_every_rank_holds_all_state():
    got = _bytes(tp=2, pp=2, distributed_optimizer=False)
    n = STAGE_TP2_PP2
    assert got["gradients"] == pytest.approx(4 * n)  # fp32 gradients
    assert got["optimizer"] == pytest.approx(12 * n)  # master + m + v, not divided


@pytest.mark.parametrize(
    "cand,shard,tokens",
    [
        ({}, 8, 64),  # TP 1 PP 1: DP 8
        ({"cp": 2}, 8, 32),  # CP 2: DP 4, the state over DP x CP = 8, half the sequence per rank
        ({"tp": 8}, 1, 64),  # TP 8: DP 1, nothing to divide over
    ],
)
def test_optimizer_state_is_divided_over_dp_times_cp(cand, shard, tokens):
    got = _bytes(**cand)
    tp = cand.get("tp", 1)
    n = WHOLE if tp == 1 else L * LAYER_TP8 + V // 8 * H + S * H + 2 * H
    assert got["weights"] == pytest.approx(2 * n)
    assert got["optimizer"] == pytest.approx(12 * n / shard)
    # PP 1: all L layers of one microbatch in flight; logits of `tokens` tokens
    assert got["activations"] == pytest.approx(34 * tokens * H / tp * L)
    assert got["logits"] == pytest.approx(tokens * V * 4 / tp)


@pytest.mark.parametrize(
    "recompute,per_token",
    [
        ("none", 34 * 4),  # 34 B/token/hidden per layer, 4 layer-microbatches in flight (as above)
        ("selective", 26 * 4),  # attention's softmax / dropout recomputed: 26 B
        ("full", 2 * 4 + 34),  # layer inputs only (2 B), + one layer's full working set
    ],
)
def test_activations_by_recompute_mode(recompute, per_token):
    got = _bytes(tp=2, pp=2, recompute=recompute)
    assert got["activations"] == pytest.approx(per_token * 64 * H / 2)


def test_fp8_stores_linear_inputs_in_8_bits():
    plain, fp8 = _bytes(tp=2, pp=2), _bytes(tp=2, pp=2, fp8=True)
    assert fp8["activations"] == pytest.approx(0.8 * plain["activations"])  # gpt3's fp8_act_factor
    assert fp8["weights"] == plain["weights"]  # FP8 matmuls keep bf16 weights


def test_interleaved_schedule_keeps_more_chunks_in_flight():
    # PP 2, VP 2, GA 4: 2(PP-1) + (VP-1)PP + 1 = 5 chunks of L/(PP VP) = 1 layer (Narayanan et al.)
    got = _bytes(tp=2, pp=2, vp=2)
    assert got["activations"] == pytest.approx(34 * 64 * H / 2 * 5)
    # GA 1 (GBS 2 = DP 2 x MBS 1): min(GA x VP, 5) = 2 chunks
    small = _bytes(tp=2, pp=2, vp=2, gbs=2)
    assert small["activations"] == pytest.approx(34 * 64 * H / 2 * 2)
    # without interleaving and GA 1: one microbatch of L/PP = 2 layers
    assert _bytes(tp=2, pp=2, gbs=2)["activations"] == pytest.approx(34 * 64 * H / 2 * 2)


def test_fsdp_shards_weights_and_gathers_two_layers():
    got = _bytes(fsdp=True)  # DP 8
    assert got["weights"] == pytest.approx(2 * WHOLE / 8)
    # the running and the prefetched layer in bf16, the model's average layer (params / L)
    assert got["fsdp_gathered"] == pytest.approx(2 * (WHOLE / L) * 2)


def test_candidates_sharing_a_memory_key_need_the_same_memory():
    """The search prices a layout once across global batches (memory.memory_key): a key that
    merges candidates whose memory differs would show one's figures for the other."""
    w, hw = W.get(benchmarks.get("gpt3"), CFG, "tiny"), _hw()
    cands = [
        M.Candidate(tp=tp, pp=pp, vp=vp, mbs=1, gbs=gbs, fp8=False)
        for tp, pp, vp in [(1, 2, 1), (2, 2, 1), (1, 4, 1), (1, 2, 2)]
        for gbs in (4, 8, 16, 32, 64)
    ]
    mem = {c: M.estimate(w, c, hw, K) for c in cands}
    groups: dict = {}
    for c in cands:
        groups.setdefault(M.memory_key(w, c, hw.world), []).append(c)
    for same in groups.values():
        assert all(mem[c] == mem[same[0]] for c in same), same
    assert len(groups) < len(cands)  # the GBS variants past the pipeline's depth do share one


def test_on_cpu_no_cuda_context_is_counted():
    w = W.get(benchmarks.get("gpt3"), CFG, "tiny")
    hw = planner.resolve_hardware("cpu-local")
    got = M.estimate(w, M.Candidate(mbs=1, gbs=hw.world, fp8=False), hw, K)
    parts = sum(v for k, v in got.items() if k != "framework")
    assert got["framework"] == pytest.approx(0.3 + 0.05 * parts)  # gloo: 0.3 GiB, not 3


def test_data_parallel_record_accounting():
    """DP benchmarks (stable_diffusion): bf16 weights, fp32 gradients, Adam state over the world."""
    w = W.get(benchmarks.get("stable_diffusion"))
    n = w.params
    got = M.model_bytes(w, M.Candidate(mbs=1, gbs=8), _hw())
    assert got == pytest.approx({"weights": 2 * n, "gradients": 4 * n, "optimizer": 12 * n / 8})


def test_a_deeper_interleaved_pipeline_caps_the_chunks_in_flight():
    # TP 1, PP 4, VP 2 on 8 GPUs: DP 2. In flight: min(GA x VP, 2(PP-1) + (VP-1)PP + 1 = 11) chunks
    # of L/(PP VP) = 0.5 layer. GA 2 (GBS 4): 4 chunks, GA 4: 8; GA 8 (GBS 16): the cap, 11
    for gbs, chunks in [(4, 4), (8, 8), (16, 11), (32, 11)]:
        got = _bytes(pp=4, vp=2, gbs=gbs)
        assert got["activations"] == pytest.approx(34 * 64 * H * 0.5 * chunks), gbs
    # the search prices GBS 16 and 32 once (the same 11 chunks), GBS 4 apart
    w = W.get(benchmarks.get("gpt3"), CFG, "tiny")
    key = {g: M.memory_key(w, M.Candidate(pp=4, vp=2, mbs=1, gbs=g), 8) for g in (4, 8, 16, 32)}
    assert key[16] == key[32] and len({key[4], key[8], key[16]}) == 3  # GA x VP 4, 8, then the cap


def test_context_parallel_alone_still_shards_the_optimizer():
    # TP 4, CP 2 on 8 GPUs: DP 1, but the distributed optimizer shards over DP x CP = 2
    got = _bytes(tp=4, cp=2)
    n = L * LAYER_TP4 + V // 4 * H + S * H + 2 * H
    assert got["optimizer"] == pytest.approx(12 * n / 2)


LAYER_TP4 = (3 * H * H + 3 * H) // 4 + H * H // 4 + H + (F * H + F) // 4 + H * F // 4 + H + 4 * H


def test_fsdp_with_tensor_and_context_parallelism():
    # TP 2, CP 2: DP 2; weights over DP x CP = 4; two gathered layers of params / L, split over TP 2
    got = _bytes(tp=2, cp=2, fsdp=True)
    stage = L * LAYER_TP2 + V // 2 * H + S * H + 2 * H
    assert got["weights"] == pytest.approx(2 * stage / 4)
    assert got["fsdp_gathered"] == pytest.approx(2 * (WHOLE / L) * 2 / 2)


def test_adapters_keep_gradients_and_optimizer_state_of_the_trainable_parameters_only():
    """Llama 2 70B LoRA as the record implementations run it: the frozen base's bf16 weights per
    stage, gradients and Adam state only for the 44,564,480 adapter parameters, split over TP x PP."""
    w = W.get(benchmarks.get("llama2_70b_lora"))
    assert w.trainable_params == 44_564_480
    got = M.model_bytes(w, M.Candidate(tp=2, pp=2, mbs=1, gbs=8, fp8=False), _hw())  # DP 2
    lora = 44_564_480 / (2 * 2)
    assert got["gradients"] == pytest.approx(2 * lora)
    assert got["optimizer"] == pytest.approx(12 * lora / 2)  # over DP 2
    assert got["weights"] == pytest.approx(2 * w.params_per_stage(2, 2))


def test_data_parallel_activations_are_the_per_sample_figure_times_the_batch():
    w = W.get(benchmarks.get("stable_diffusion"))
    for mbs in (1, 4):
        got = M.estimate(w, M.Candidate(mbs=mbs, gbs=8 * mbs), _hw(), K)
        assert got["activations"] == pytest.approx(mbs * w.act_gib_per_sample)  # GiB


def test_the_harness_on_cpu_is_priced_in_fp32():
    """A CPU system runs the harness's GPT in fp32 (bf16 only on GPUs): 4 B weights, no master copy."""
    cfg = CFG.model_copy(update={"precision": "bf16", "distributed_optimizer": False})
    w = W.get(benchmarks.get("gpt3"), cfg, "tiny")
    c = M.Candidate(mbs=1, gbs=8, fp8=False, impl="harness")
    cpu = planner.resolve_hardware("cpu-local")
    on_cpu = M.estimate(w, M.Candidate(mbs=1, gbs=cpu.world, fp8=False, impl="harness"), cpu, K)
    on_gpu = M.estimate(w, c, _hw(), K)
    assert on_cpu["weights"] * GIB == pytest.approx(4 * WHOLE)
    assert on_cpu["optimizer"] * GIB == pytest.approx(8 * WHOLE)  # Adam m, v; no fp32 master
    assert on_gpu["weights"] * GIB == pytest.approx(2 * WHOLE)
    assert on_gpu["optimizer"] * GIB == pytest.approx(12 * WHOLE)  # master + m + v, not sharded


def test_the_plan_shows_whole_degrees_that_multiply_out():
    """`mlperf plan --json` layouts: DP and GA are whole numbers, TP x PP x CP x DP = world and
    DP x MBS x GA = GBS."""
    plan = planner.plan(benchmarks.get("gpt3"), "dgx-h100x8")  # 8 nodes of 8
    from harness.planner.report import option_json

    for o in plan.options[:5]:
        lay = option_json(o, plan)["layout"]
        assert all(type(lay[k]) is int for k in ("tp", "pp", "cp", "dp", "mbs", "ga", "gbs")), lay
        assert lay["tp"] * lay["pp"] * lay["cp"] * lay["dp"] == plan.hardware.world == 64
        assert lay["dp"] * lay["mbs"] * lay["ga"] == lay["gbs"]


def test_the_harness_shards_its_optimizer_over_dp_times_cp():
    """The harness's GPT with the distributed optimizer: master + Adam (12 B) over DP 2 x CP 2."""
    from harness.planner import params as P

    cfg = CFG.model_copy(update={"precision": "bf16", "distributed_optimizer": True})
    got = P.rank_bytes(benchmarks.get("gpt3"), cfg, {"dp": 2, "cp": 2})
    assert got["optimizer"] == pytest.approx(12 * WHOLE / 4)
    assert got["weights"] == 2 * WHOLE and got["gradients"] == 4 * WHOLE  # fp32 grad buffer, whole
