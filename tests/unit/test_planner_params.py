"""Parameter counts and per-rank bytes as the harness's implementations build and shard each model
(torch-free): the benchmarks' cost models (benchmarks/<name>/cost.py), asked through
harness/planner/params.py. Exact counts were checked against the models built on
PyTorch's meta device (reference_impls/*/model.py, torch 2.13): R-GAT 20,968,871, SD v2 UNet
865,910,724, Llama 2 70B base 68,976,648,192 + LoRA r16 44,564,480; tiny GPT-3 120,576 is the
count configs/tiny.yaml states."""

from __future__ import annotations

import pytest
import yaml

import benchmarks
from benchmarks.costs import zero_busiest
from benchmarks.gnn import cost as gnn_cost
from benchmarks.gpt3 import cost as gpt3_cost
from benchmarks.gpt3.config import Gpt3Config
from benchmarks.llama2_70b_lora import cost as llama2_cost
from benchmarks.stable_diffusion import cost as sd_cost
from harness.planner import params as P

GIB = 2**30
B = benchmarks.get


def test_published_model_sizes():
    gpt3 = P.parameters(B("gpt3"))["total"]
    assert gpt3 == pytest.approx(175e9, rel=0.005)  # GPT-3 175B
    llama = P.parameters(B("llama2_70b_lora"))
    assert llama["base"] == 68_976_648_192  # Llama 2 70B: 69.0 B
    assert llama["trainable"] == 44_564_480  # LoRA r16 on qkv_proj and o_proj, 80 layers
    assert P.parameters(B("stable_diffusion"))["total"] == 865_910_724  # SD v2 UNet ~866 M
    assert P.parameters(B("gnn"))["total"] == 20_968_871


def test_tiny_gpt3_count_matches_its_config_comment():
    tiny = yaml.safe_load((benchmarks.get("gpt3").configs_dir / "tiny.yaml").read_text())["config"]
    assert P.parameters(B("gpt3"), Gpt3Config(**tiny))["total"] == 120_576


def test_gpt3_stages_split_the_model_exactly():
    cfg = Gpt3Config.model_construct()
    whole = P.parameters(B("gpt3"))["total"]
    h, v = cfg.hidden_size, cfg.vocab_size
    for tp, pp in [(1, 1), (1, 8), (4, 8), (8, 12)]:
        stages = gpt3_cost.stages(cfg, tp, pp)
        assert len(stages) == pp
        replicated = cfg.num_layers * 6 * h + cfg.max_sequence_length * h + 2 * h  # on every TP rank
        total = tp * sum(stages) - (tp - 1) * replicated
        padded = tp * -(-v // tp)  # each TP rank holds ceil(V / TP) vocabulary rows
        extra = (padded - v) * h + (padded * h if pp > 1 else 0)  # + the output copy on the last stage
        assert total - whole == extra


def test_record_layout_bytes_per_rank_gpt3_dgx_h100x64():
    """TP4 PP8 VP4 DP16, distributed optimizer, bf16 weights, fp32 grad buffer."""
    cfg = Gpt3Config.model_construct(distributed_optimizer=True, precision="bf16")
    b = P.rank_bytes(B("gpt3"), cfg, {"tp": 4, "pp": 8, "vp": 4, "dp": 16})
    n = max(gpt3_cost.stages(cfg, 4, 8))
    assert b["parameters_rank"] == n
    assert b["weights"] == 2 * n and b["gradients"] == 4 * n
    assert b["optimizer"] == pytest.approx(12 * n / 16)  # fp32 master + Adam m, v over DP 16
    off = P.rank_bytes(
        B("gpt3"), cfg.model_copy(update={"distributed_optimizer": False}), {"tp": 4, "pp": 8, "dp": 16}
    )
    assert off["optimizer"] == 12 * n
    cpu = P.rank_bytes(B("gpt3"), cfg, {"tp": 4, "pp": 8, "dp": 16}, device="cpu")
    assert cpu["weights"] == 4 * n and cpu["optimizer"] == pytest.approx(8 * n / 16)  # fp32: no master copy


def test_llama2_lora_under_fsdp_shards_everything_over_dp_x_cp():
    from benchmarks.llama2_70b_lora.config import Llama2LoraConfig

    cfg = Llama2LoraConfig()
    b = P.rank_bytes(B("llama2_70b_lora"), cfg, {"dp": 4, "cp": 2})
    c = llama2_cost.counts(cfg)
    assert b["weights"] == pytest.approx((2 * c["base"] + 4 * c["lora"]) / 8)
    assert b["gradients"] == pytest.approx(4 * c["lora"] / 8)
    assert b["optimizer"] == pytest.approx(8 * c["lora"] / 8)
    assert b["fsdp_gathered"] == 2 * 2 * c["layer"]
    single = P.rank_bytes(B("llama2_70b_lora"), cfg.model_copy(update={"fsdp": False}), {"dp": 8})
    assert single["weights"] / GIB > 128 and "fsdp_gathered" not in single


def test_dp_benchmarks_replicate_and_zero_shards_only_the_optimizer():
    from benchmarks.stable_diffusion.config import StableDiffusionConfig

    n = sd_cost.count(StableDiffusionConfig())
    b = P.rank_bytes(B("stable_diffusion"), StableDiffusionConfig(distributed_optimizer=True), {"dp": 8})
    assert (b["weights"], b["gradients"]) == (4 * n, 4 * n)
    # whole tensors, largest first, to the emptiest rank: over 8 ranks within 0.01 % of n / 8 ...
    assert b["optimizer"] == 8 * zero_busiest(sd_cost.tensors(StableDiffusionConfig()), 8)
    assert b["optimizer"] == pytest.approx(8 * n / 8, rel=1e-4)
    # ... over 64 the largest tensor (an up-block 3x3 conv 2560 -> 1280) alone outweighs n / 64
    b64 = P.rank_bytes(B("stable_diffusion"), StableDiffusionConfig(distributed_optimizer=True), {"dp": 64})
    assert b64["optimizer"] == 8 * 2560 * 1280 * 9 > 2 * 8 * n / 64
    g = P.rank_bytes(B("gnn"), None, {"dp": 64})
    assert g["optimizer"] == 8 * gnn_cost.count(B("gnn").default_config())
