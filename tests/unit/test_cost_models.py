"""The planner asks the benchmark object, never its name (issue 42): each benchmark's cost model
(benchmarks/<name>/cost.py) answers what is particular to it, a benchmark without one gets one
line from every `mlperf plan` path, no module of harness/planner/ names a benchmark, and the memory
the planner predicts for the harness's own implementations is pinned against arithmetic done here,
independently of the cost models (Adam's m and v, the fp32 master copy, the bf16 weights)."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import benchmarks
from benchmarks.costs import CostModel
from harness import planner
from harness.commands.plan import plan as plan_cmd
from harness.core.errors import ConfigError
from harness.planner import memory as M
from harness.planner import params as P
from harness.planner import workloads as W

REPO = Path(__file__).resolve().parents[2]
NO_COST = "the planner has no cost model for nocost_bench"


# ---- (a) no cost model: one line, never another benchmark's numbers ---------------------------------
@pytest.fixture
def nocost():
    """gpt3 under another name without a cost model (its rules, configs and implementation kept:
    `Benchmark.rules` reads gpt3's benchmark.yaml from its folder), in a scratch registry."""
    with benchmarks.scratch():
        yield benchmarks.register(dataclasses.replace(benchmarks.get("gpt3"), name="nocost_bench", cost=None))


def _one_line(res_or_exc) -> None:
    exc = getattr(res_or_exc, "exception", res_or_exc)
    assert isinstance(exc, ConfigError), repr(exc)
    assert exc.exit_code == 2 and str(exc) == NO_COST, str(exc)


@pytest.mark.parametrize(
    "args",
    [
        ["--system", "dgx-h100x8"],  # search
        ["--system", "dgx-h100x8", "--global-batch-size", "64", "--explain"],
        ["--system", "cpu-local"],  # run mode: the tiny run `mlperf run` would start
        ["--system", "cpu-local", "--size", "tiny", "--set", "micro_batch_size=4"],
        ["--system", "cpu-local", "--calibrate", "no/such/run"],  # before any run folder is read
    ],
    ids=["search", "search-gbs-explain", "run", "run-set", "calibrate"],
)
def test_a_benchmark_without_a_cost_model_gets_one_line(nocost, args):
    res = CliRunner().invoke(plan_cmd, ["nocost_bench", *args, "--json"], standalone_mode=False)
    _one_line(res)
    assert res.output == ""  # nothing printed: no other benchmark's plan


def test_system_json_and_the_runners_fallback_say_the_same(nocost, tmp_path):
    f = tmp_path / "system.json"
    f.write_text(
        '{"number_of_nodes": "1", "accelerators_per_node": "8", "accelerator_model_name": "NVIDIA H100-SXM5-80GB"}'
    )
    _one_line(CliRunner().invoke(plan_cmd, ["nocost_bench", "--system-json", str(f)], standalone_mode=False))
    for call in (
        lambda: planner.best_config(nocost, "dgx-h100x64"),  # `mlperf run` on an untuned system
        lambda: planner.plan(nocost, "dgx-h100x8"),
        lambda: W.get(nocost),
        lambda: P.rank_bytes(nocost, layout={"dp": 8}),  # `mlperf run --dry-run --build`'s figures
        lambda: P.parameters(nocost),
    ):
        with pytest.raises(ConfigError) as e:
            call()
        _one_line(e.value)


def test_every_shipped_benchmark_has_a_whole_cost_model():
    members = [m for m in vars(CostModel) if not m.startswith("_")]
    assert len(members) >= 10
    for name in benchmarks.available():
        cost = benchmarks.get(name).cost
        assert cost is not None, name
        missing = [m for m in members if not callable(getattr(cost, m, None))]
        assert not missing, (name, missing)


# ---- (b) harness/planner/ names no benchmark -----------------------------------------------------
FAMILIES = ("llama", "unet", "igbh", "flux", "deepseek", "gpt_oss", "rgat", "sdv2")


def _names() -> set[str]:
    """Every benchmark name and alias the registry and the installed mlperf-logging know, and the
    model families the next benchmarks bring."""
    from harness.core.rulesets import all_benchmarks

    return {n.lower() for n in (*benchmarks.aliases(), *all_benchmarks(), *FAMILIES)}


def _code_tokens(tree: ast.AST):
    """(line, text) of every identifier, attribute, argument, import and string constant that is
    not a docstring (module, class, function, or attribute docstring)."""
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        for st in body if isinstance(body, list) else []:
            if (
                isinstance(st, ast.Expr)
                and isinstance(st.value, ast.Constant)
                and isinstance(st.value.value, str)
            ):
                docs.add(id(st.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value
        elif isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, ast.alias):
            yield getattr(node, "lineno", 0), node.name
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.lineno, node.name
        elif isinstance(node, ast.arg):
            yield node.lineno, node.arg
        elif isinstance(node, ast.keyword) and node.arg:
            yield node.value.lineno, node.arg


def test_no_planner_module_names_a_benchmark():
    """What is particular to a benchmark lives in its cost model (benchmarks/<name>/cost.py) or in
    the planner's data files (harness/planner/data/*.yaml); no exceptions."""
    names = sorted(_names(), key=len, reverse=True)
    # a name at the start of a token or after a separator (gpt3_stages, GNN_FEATURE_GIB, 'sd')
    pat = re.compile(r"(?<![a-z0-9])(" + "|".join(map(re.escape, names)) + r")(?![a-z])", re.I)
    found = []
    for path in sorted((REPO / "harness" / "planner").rglob("*.py")):
        for line, text in _code_tokens(ast.parse(path.read_text())):
            if pat.search(text):
                found.append(f"{path.relative_to(REPO)}:{line}: {text[:60]!r}")
    assert not found, "\n".join(found)


def test_the_scan_catches_a_planted_name():
    tree = ast.parse('def f(w):\n    """gpt3 in a docstring is fine"""\n    return w.name == "gpt3"\n')
    pat = re.compile(r"(?<![a-z0-9])(gpt3)(?![a-z])", re.I)
    assert [t for _, t in _code_tokens(tree) if pat.search(t)] == ["gpt3"]


# ---- (c) the memory the planner predicts, pinned against independent arithmetic ------------------
def _hw():
    """One node of 8 H100s (systems/dgx-h100x1.yaml)."""
    hw = planner.resolve_hardware("dgx-h100x1")
    assert hw.world == 8 and hw.kind != "cpu"
    return hw


def _harness_model_bytes(name: str, **candidate) -> dict:
    """Weights, gradients, optimizer (bytes) of the busiest rank as `mlperf plan` predicts them for
    the harness's own implementation (memory.model_bytes, impl 'harness') on 8 GPUs, DP 8."""
    c = M.Candidate(gbs=8, impl="harness", **candidate)
    return M.model_bytes(W.get(benchmarks.get(name)), c, _hw())


def test_gpt3_bf16_weights_fp32_grads_master_and_adam_sharded_over_dp():
    """TP1 PP1 DP8 with the distributed optimizer: bf16 weights (2 B), fp32 gradient buffer (4 B),
    fp32 master copy + Adam m and v (12 B) divided over the 8 data-parallel ranks."""
    L, h, V, s = 96, 12288, 50257, 2048  # GPT-3 175B; ffn = 4h
    per_layer = 12 * h * h + 13 * h  # QKV, proj, fc1, fc2 with biases; two LayerNorms
    n = L * per_layer + V * h + s * h + 2 * h  # + word and position embeddings, final LayerNorm
    got = _harness_model_bytes("gpt3", distributed_optimizer=True)
    assert got == {"weights": 2 * n, "gradients": 4 * n, "optimizer": pytest.approx(12 * n / 8, rel=1e-12)}
    assert P.parameters(benchmarks.get("gpt3"))["total"] == n


def test_llama2_lora_frozen_bf16_base_and_fp32_adapters_with_adam():
    """Without FSDP: the whole bf16 base and fp32 LoRA adapters on every rank; gradients (4 B) and
    AdamW m and v (8 B) of the adapters only."""
    L, h, f, V, r = 80, 8192, 28672, 32000, 16
    kv = 8 * (h // 64)  # grouped-query attention: 8 K/V heads of 128
    base = L * (h * h + 2 * h * kv + h * h + 3 * h * f + 2 * h) + 2 * V * h + h
    lora = L * ((r * h + (h + 2 * kv) * r) + (r * h + h * r))  # qkv_proj and o_proj: A [r, in], B [out, r]
    assert (base, lora) == (68_976_648_192, 44_564_480)  # Llama 2 70B, the checker's LoRA r16
    got = _harness_model_bytes("llama2_70b_lora", fsdp=False)
    assert got == {"weights": 2 * base + 4 * lora, "gradients": 4 * lora, "optimizer": 8 * lora}


@pytest.mark.parametrize(
    "name,n",
    # R-GAT, SD v2 UNet, FLUX.1-schnell (with fsdp off): the meta builds' counts
    [("gnn", 20_968_871), ("stable_diffusion", 865_910_724), ("flux1", 11_891_178_560)],
)
def test_data_parallel_fp32_weights_grads_and_adam_replicated(name, n):
    """DDP replicas in fp32: weights and gradients 4 B, Adam m and v 8 B per parameter."""
    got = _harness_model_bytes(name, distributed_optimizer=False)
    assert got == {"weights": 4 * n, "gradients": 4 * n, "optimizer": 8 * n}
    gib = M.estimate(W.get(benchmarks.get(name)), M.Candidate(gbs=8, impl="harness"), _hw(), _k(name))
    assert gib["optimizer"] == pytest.approx(8 * n / 2**30, rel=1e-12)


def _k(name):
    from harness.planner import calibration as C
    from harness.planner import stacks

    return C.for_prediction(name, _hw(), stacks.make("mlperf-harness"))[0]


# ---- (d) FLUX.1: the parameter list mirrors diffusers' module tree, the FLOPs its Linear shapes ----
def _flux(name: str | None = None, **over):
    import yaml

    from benchmarks.flux1.config import Flux1Config

    base = {}
    if name:  # a shipped config's `config:` fields
        base = yaml.safe_load((REPO / "benchmarks/flux1/configs" / f"{name}.yaml").read_text())["config"]
    return Flux1Config(**{**base, **over})


ODD_FLUX = {  # nothing a power of two or equal: a swapped dimension cannot cancel out
    "num_layers": 2, "num_single_layers": 3, "num_attention_heads": 3, "attention_head_dim": 24,
    "axes_dims_rope": [4, 10, 10], "joint_attention_dim": 40, "pooled_projection_dim": 24,
    "latent_channels": 5, "latent_size": 6, "text_max_length": 7,
}  # fmt: skip


@pytest.mark.parametrize(
    "name,over,n",
    [(None, {}, 11_891_178_560), ("tiny", {}, 1_212_096), (None, ODD_FLUX, None)],
    ids=["default", "tiny", "odd"],
)
def test_flux1_tensors_are_the_meta_builds_parameters(name, over, n):
    torch = pytest.importorskip("torch")
    from benchmarks.flux1 import cost
    from reference_impls.flux1 import model as M

    cfg = _flux(name, **over)
    with torch.device("meta"):
        model = M.build(cfg)  # the implementation's own build (diffusers FluxTransformer2DModel)
    assert cost.tensors(cfg) == [p.numel() for p in model.parameters()]
    assert cost.shapes(cfg) == [(p.shape[0], p[0].numel()) for p in model.parameters()]  # FSDP2's dim 0
    assert n is None or cost.count(cfg) == n


def test_flux1_forward_flops_of_the_full_model():
    """6.62e12 matmul FLOPs (2 x 12 d^2 per token per block over 512 tokens, 57 blocks, + the T5
    projection) + 1.84e11 attention (4 x 512^2 x 3072 x 57) per sample; training 3x, 4x recomputed."""
    from benchmarks.flux1 import cost

    f = cost.forward_flops(_flux())
    assert f["attention"] == 4 * 512**2 * 3072 * 57
    assert f["matmul"] == pytest.approx(6.62e12, rel=0.01)
    w = cost.COST.workload(_flux(), "full")
    assert w.fwd_flops_per_sample == pytest.approx(6.8e12, rel=0.01)
    assert (w.kind, w.precision, w.params) == ("dp", "bf16", 11_891_178_560)
    assert w.flops_per_sample == 4 * w.fwd_flops_per_sample  # activation checkpointing on
    off = cost.COST.workload(_flux(activation_checkpointing=False), "full")
    assert off.flops_per_sample == 3 * off.fwd_flops_per_sample
    assert off.act_gib_per_sample > 10 * w.act_gib_per_sample  # only block inputs kept when on


def test_flux1_fsdp_shards_fp32_weights_grads_and_adamw_over_all_ranks():
    from benchmarks.flux1 import cost

    n = 11_891_178_560
    for world in (8, 64):
        got = cost.COST.rank_bytes(_flux(), {"dp": world})
        held = got["parameters_rank"]
        assert n / world <= held < n / world * 1.001  # dim-0 chunks: rank 0 holds the ceiling
        assert (got["weights"], got["gradients"], got["optimizer"]) == (4 * held, 4 * held, 8 * held)
        assert 1.3 * 2**30 < got["fsdp_gathered"] < 1.4 * 2**30  # two bf16 double blocks + the root
    assert cost.COST.rank_bytes(_flux(fsdp=False), {"dp": 64}) == {
        "parameters_rank": n, "weights": 4 * n, "gradients": 4 * n, "optimizer": 8 * n,
    }  # fmt: skip


def test_flux1_evaluations_and_checkpoints():
    """Every ceil(262144 / GBS) x GBS samples all 29,696 eval samples; the run ends at one."""
    from benchmarks.flux1 import cost

    w = W.get(benchmarks.get("flux1"))
    assert cost.COST.evals(w, 14_109 * 512, 512) == (28, 29_696)  # the RCP mean at GBS 512
    assert cost.COST.evals(w, 262_144, 512) == (1, 29_696)
    assert cost.COST.evals(w, 3 * 262_656, 1_368)[0] == 3  # ceil(262144 / 1368) = 192 steps each
    assert cost.COST.samples_per_rcp_unit(512, "6.1.0") == 1.0
    assert cost.COST.checkpoint_every_steps(_flux("dgx-h100x8")) == 2048
    assert cost.COST.checkpoint_every_steps(_flux("tiny")) == 32
    assert cost.COST.checkpoint_every_steps(_flux(checkpoint_interval_steps=700)) == 1024  # next eval
    assert cost.COST.checkpoint_every_steps(_flux()) == 0


@pytest.mark.parametrize("system", ["dgx-h100x8", "dgx-b200x1"])
def test_flux1_plans_on_the_shipped_systems(system):
    import json

    res = CliRunner().invoke(plan_cmd, ["flux1", "--system", system, "--json"], standalone_mode=False)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["parameters_total"] == 11_891_178_560
    assert 30 < out["predicted_min"] < 3000
