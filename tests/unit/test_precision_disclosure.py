"""`lowest_precision(device)`: the three precision keys ruleset 6.1.0 makes mandatory, per config.

Two things: every shipped config (benchmarks/<name>/configs/*.yaml, on each device kind its
switches allow) discloses only values the installed package's training_6.1.0/common.yaml accepts,
read from that file; and each value follows the switches that change what the code runs (the
reasons are in each benchmark's config.py). Torch-free: typed configs only.
"""

from __future__ import annotations

import ast
import functools
from importlib.resources import files

import pytest
import yaml

import benchmarks
from benchmarks.base import BenchmarkConfig

PARTS = ("linear", "attn", "comm")
DEVICE = {"cpu": "cpu", "gpu": "cuda"}  # Switch.on's kinds -> the RunPlan's device


@functools.cache
def allowed(part: str) -> frozenset[str]:
    """The list literal in the CHECK of the KEY lowest_numerical_precision_in_<part>."""
    path = files("mlperf_logging") / "compliance_checker" / "training_6.1.0" / "common.yaml"
    name = f"lowest_numerical_precision_in_{part}"
    for record in yaml.safe_load(path.read_text(encoding="utf-8")):
        key = record.get("KEY") if isinstance(record, dict) else None
        if key and key.get("NAME") == name:
            # CHECK is " v['value'] in [...] ": the list is the comparison's right-hand side.
            compare = ast.parse(key["CHECK"].strip(), mode="eval").body
            assert isinstance(compare, ast.Compare) and isinstance(compare.ops[0], ast.In), key["CHECK"]
            return frozenset(ast.literal_eval(compare.comparators[0]))
    raise AssertionError(f"{path}: no KEY named {name}")


def _config_values(bench: str, name: str) -> dict:
    """A shipped config file's values as `mlperf run` layers them: a tiny-size file over tiny.yaml."""
    folder = benchmarks.get(bench).configs_dir
    data = yaml.safe_load((folder / name).read_text(encoding="utf-8"))
    base = {}
    if data.get("size", "full") == "tiny":
        base = yaml.safe_load((folder / "tiny.yaml").read_text(encoding="utf-8"))["config"]
    return {**base, **(data.get("config") or {})}


def _devices(cfg: BenchmarkConfig) -> list[str]:
    """The devices whose code honours every switch the config sets (others refuse it)."""
    kinds = set(DEVICE)
    for name, sw in type(cfg).SWITCHES.items():
        if getattr(cfg, name) != sw.off:
            kinds &= set(sw.on)
    return [DEVICE[k] for k in sorted(kinds)]


SHIPPED = [
    (b, f.name) for b in benchmarks.available() for f in sorted(benchmarks.get(b).configs_dir.glob("*.yaml"))
]


def _set_te(monkeypatch, installed: bool) -> None:
    """The Megatron-GPT family on CUDA takes Transformer Engine's layer spec where it imports
    (model.layer_spec)."""
    import benchmarks.megatron_gpt as family

    real = family.find_spec
    fake = object() if installed else None
    monkeypatch.setattr(family, "find_spec", lambda n: fake if n == "transformer_engine" else real(n))


@pytest.fixture(params=[True, False], ids=["te", "no-te"])
def te(request, monkeypatch):
    _set_te(monkeypatch, request.param)
    return request.param


def test_allowed_values_come_from_the_package():
    for part in PARTS:
        assert {"fp32", "bfloat16", "fp8"} <= allowed(part)
        assert "bf16" not in allowed(part)  # the log spells it 'bfloat16'


@pytest.mark.parametrize(("bench", "name"), SHIPPED, ids=[f"{b}-{n}" for b, n in SHIPPED])
def test_shipped_configs_disclose_allowed_values(bench, name, te):
    cfg = benchmarks.get(bench).config.model_validate(_config_values(bench, name))
    devices = _devices(cfg)
    assert devices, f"{bench} {name}: no device kind honours its switches"
    for device in devices:
        got = cfg.lowest_precision(device)
        assert set(got) == set(PARTS), (bench, name, device, got)
        for part in PARTS:
            assert got[part] in allowed(part), (bench, name, device, part, got[part])


def test_base_config_has_no_precision_of_its_own():
    with pytest.raises(NotImplementedError):
        BenchmarkConfig(global_batch_size=1).lowest_precision("cpu")
    for bench in benchmarks.available():
        cls = benchmarks.get(bench).config
        assert cls.lowest_precision is not BenchmarkConfig.lowest_precision, bench


# (benchmark, device, settings over tiny.yaml, Transformer Engine installed, (linear, attn, comm))
BF16 = ("bfloat16",) * 3
FP32 = ("fp32",) * 3
CASES = [
    # gpt3: precision sets params_dtype; DDP reduces grads in fp32, activations/params travel in it.
    ("gpt3", "cpu", {"precision": "fp32"}, True, FP32),
    ("gpt3", "cpu", {"precision": "bf16"}, True, ("bfloat16", "bfloat16", "fp32")),
    ("gpt3", "cuda", {"precision": "bf16"}, True, ("bfloat16", "bfloat16", "fp32")),
    ("gpt3", "cuda", {"precision": "fp32"}, True, ("tf32", "fp32", "fp32")),  # TE's fp32 GEMMs
    ("gpt3", "cuda", {"precision": "fp32"}, False, FP32),  # local spec
    ("gpt3", "cpu", {"precision": "bf16", "distributed_optimizer": True}, True, BF16),
    ("gpt3", "cpu", {"precision": "bf16", "tensor_model_parallel_size": 2}, True, BF16),
    ("gpt3", "cpu", {"precision": "bf16", "pipeline_model_parallel_size": 2}, True, BF16),
    ("gpt3", "cpu", {"precision": "fp32", "tensor_model_parallel_size": 2}, True, FP32),
    # fp8: TE FP8 GEMMs on CUDA only, attention stays bf16; FP8 on the wire with sequence parallel.
    ("gpt3", "cuda", {"precision": "bf16", "fp8": True}, True, ("fp8", "bfloat16", "fp32")),
    ("gpt3", "cpu", {"precision": "bf16", "fp8": True}, True, ("bfloat16", "bfloat16", "fp32")),
    ("gpt3", "cuda", {"precision": "fp32", "fp8": True}, True, ("fp8", "fp32", "fp32")),
    (
        "gpt3",
        "cuda",
        {"precision": "bf16", "fp8": True, "tensor_model_parallel_size": 2, "sequence_parallel": True},
        True,
        ("fp8", "bfloat16", "fp8"),
    ),
    (
        "gpt3",
        "cuda",
        {"precision": "bf16", "fp8": True, "tensor_model_parallel_size": 2},
        True,
        ("fp8", "bfloat16", "bfloat16"),
    ),
    (
        "gpt3",
        "cuda",
        {"precision": "bf16", "tensor_model_parallel_size": 2, "sequence_parallel": True},
        True,
        BF16,
    ),
    # llama2: the base's dtype everywhere (FSDP gathers it), torchao FP8 for the base linears only.
    ("llama2_70b_lora", "cpu", {"precision": "fp32"}, True, FP32),
    ("llama2_70b_lora", "cpu", {"precision": "bf16"}, True, BF16),
    ("llama2_70b_lora", "cuda", {"precision": "bf16", "fp8": True}, True, ("fp8", "bfloat16", "bfloat16")),
    ("llama2_70b_lora", "cuda", {"precision": "fp32", "fp8": True}, True, ("fp8", "fp32", "fp32")),
    # gnn: amp makes the Linears bf16; GAT attention and DDP stay fp32; fp8_features changes nothing.
    ("gnn", "cpu", {"amp": False, "fp8_features": False}, True, FP32),
    ("gnn", "cpu", {"amp": False, "fp8_features": True}, True, FP32),
    ("gnn", "cuda", {"amp": True, "fp8_features": False}, True, ("bfloat16", "fp32", "fp32")),
    ("gnn", "cuda", {"amp": True, "fp8_features": True}, True, ("bfloat16", "fp32", "fp32")),
    # stable_diffusion: the autocast dtype for Linear/Conv2d and SDPA; cuDNN TF32 convs in fp32 on CUDA.
    ("stable_diffusion", "cpu", {"precision": "fp32"}, True, FP32),
    ("stable_diffusion", "cuda", {"precision": "fp32"}, True, ("tf32", "fp32", "fp32")),
    ("stable_diffusion", "cpu", {"precision": "fp16"}, True, ("fp16", "fp16", "fp32")),
    ("stable_diffusion", "cuda", {"precision": "bf16"}, True, ("bfloat16", "bfloat16", "fp32")),
    (
        "stable_diffusion",
        "cuda",
        {"precision": "fp16", "flash_attention": True, "distributed_optimizer": True, "channels_last": True},
        True,
        ("fp16", "fp16", "fp32"),
    ),
]


@pytest.mark.parametrize(
    ("bench", "device", "settings", "has_te", "want"),
    CASES,
    ids=[
        f"{b}-{d}-{','.join(f'{k}={v}' for k, v in s.items())}{'' if te else '-no-te'}"
        for b, d, s, te, _ in CASES
    ],
)
def test_precision_follows_the_switches(bench, device, settings, has_te, want, monkeypatch):
    _set_te(monkeypatch, has_te)
    tiny = _config_values(bench, "tiny.yaml")
    cfg = benchmarks.get(bench).config.model_validate({**tiny, **settings})
    got = cfg.lowest_precision(device)
    assert (got["linear"], got["attn"], got["comm"]) == want
    for part in PARTS:
        assert got[part] in allowed(part)


def test_shipped_gpu_records_disclose_fp8():
    """The NVIDIA-record layouts for GPUs with fp8 on as the records run them (the configs ship it off
    until a GPU measurement shows it faster): FP8 linears, attention bf16; as shipped, bf16."""
    values = _config_values("gpt3", "dgx-h100x64.yaml")
    gpt3 = benchmarks.get("gpt3").config
    assert gpt3.model_validate(values).lowest_precision("cuda")["linear"] == "bfloat16"
    record = gpt3.model_validate({**values, "fp8": True})
    assert record.lowest_precision("cuda") == {"linear": "fp8", "attn": "bfloat16", "comm": "fp8"}
    llama = benchmarks.get("llama2_70b_lora").config
    cfg = llama.model_validate({**_config_values("llama2_70b_lora", "dgx-h100x8.yaml"), "fp8": True})
    assert cfg.lowest_precision("cuda") == {"linear": "fp8", "attn": "bfloat16", "comm": "bfloat16"}
