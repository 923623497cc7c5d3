"""bench/gpu_check.py without a GPU: its refusals (no CUDA, bad arguments), the CPU smoke path of every
sub-check at toy size (one process, shared by the tests below), the exit code when a check fails, and
its arithmetic (FLOPs against torch's own counter, the FP8 matmul against bf16, the peak lookup)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from packaging.specifiers import SpecifierSet
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "gpu_check.py"
sys.path.insert(0, str(REPO))

import bench.gpu_check as gpu_check  # noqa: E402
from bench.gpu import flops  # noqa: E402
from bench.gpu.fp8 import Fp8Linear, swap_linears  # noqa: E402
from bench.gpu.layers import GPT3_TOY, TorchGptLayer  # noqa: E402
from bench.gpu.report import Report  # noqa: E402
from bench.gpu.runs import GPU_ALSO, jobs, on_value  # noqa: E402

pytestmark = pytest.mark.slow  # trains or starts rank processes: not in the -m 'not slow' loop


def _script(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_no_cuda_exits_2_with_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a GPU CI box too
    assert gpu_check.main(["--out", str(tmp_path / "out")]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        "error: no CUDA GPU visible (torch.cuda.is_available() is False); run this on a GPU host"
    ]
    assert out == "" and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args, says",
    [
        (["--out", "x", "--device", "cpu"], "only for --smoke"),
        (["--out", "x", "--only", "gpus"], "--only gpus"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args, says):
    r = _script(*args)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and says in r.stderr


def test_a_failed_check_exits_4_and_is_named_in_the_json(tmp_path, capsys):
    args = ["--out", str(tmp_path), "--device", "cpu", "--smoke", "--only", "steps", "--budget-s", "0"]
    assert gpu_check.main(args) == 4
    doc = Report.model_validate_json((tmp_path / "gpu_check.json").read_text())
    assert doc.failed == ["sd_unet_step", "rgat_step"]
    assert all("budget was spent" in c.detail for c in doc.checks)
    assert "2 failed" in capsys.readouterr().out


def test_a_process_past_the_budget_is_stopped_with_its_children():
    import psutil

    from bench.gpu.runs import _run

    code = (
        "import subprocess, sys, time; "
        "k = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        "print(k.pid, flush=True); time.sleep(120)"
    )
    rc, out, err = _run([sys.executable, "-c", code], timeout=2)
    assert rc == 124 and "timed out" in err
    grandchild = int(out.split()[0])
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_check")
    r = _script("--out", str(out), "--device", "cpu", "--smoke")
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    doc = Report.model_validate_json((out / "gpu_check.json").read_text())
    return doc, {c.name: c for c in doc.checks}


def test_smoke_report_is_the_schema_and_says_it_is_a_smoke_run(smoke):
    doc, by_name = smoke
    assert doc.smoke and doc.device["name"] == "cpu (smoke test)" and doc.peak_tflops == {}
    assert len(by_name) == len(doc.checks) and doc.failed == []
    assert all(c.path for c in doc.checks)
    assert sorted(doc.not_checked) == sorted(
        f"{c.name}: {c.status}: {c.detail}" for c in doc.checks if c.status in ("refused", "skipped")
    )


def test_smoke_layers_and_steps_ran_with_their_flops(smoke):
    _, by_name = smoke
    toy = flops.gpt_layer_flops(2, GPT3_TOY["max_sequence_length"], GPT3_TOY["hidden_size"], 256)
    for name in ("gpt3_layer/mcore/bf16", "gpt3_layer/torch/bf16", "gpt3_layer/torch-scaled_mm/fp8"):
        c = by_name[name]
        assert c.status == "ok", c.detail
        assert c.figures["flops_per_step"] == toy and c.figures["step_s"] > 0
        assert c.figures["mfu"] is None  # no peak on a CPU: no MFU rather than a made-up one
    from bench.gpu.layers import llama31_config
    from benchmarks.llama31_8b.cost import layer_fwd_flops

    llama = by_name["llama31_layer/mcore/bf16"]  # the Llama provider's layer, RoPE passed as GPTModel does
    assert llama.status == "ok", llama.detail
    assert llama.figures["flops_per_step"] == 3.0 * layer_fwd_flops(llama31_config(True))
    oss = by_name["gpt_oss_layer/mcore/bf16"]  # one MoE layer: router, 8 toy experts top-2, window 16
    assert oss.status == "ok", oss.detail
    # forward per token: QKV 2 x 64 x (128 + 2 x 32), projection 2 x 128 x 64, router 2 x 64 x 8, two
    # experts 2 x 2 x 3 x 64 x 64, the norms' 2 x 3 x 64 the cost model counts as active; attention
    # 4 x 8 heads x 16 over the 16-token window; x 32 tokens, x 3 with the backward
    per_token = 2 * 64 * 192 + 2 * 128 * 64 + 2 * 64 * 8 + 2 * 2 * 3 * 64 * 64 + 2 * 3 * 64 + 4 * 8 * 16 * 16
    assert oss.figures["flops_per_step"] == 3.0 * 32 * per_token
    ds = by_name["deepseek_layer/mcore/bf16"]  # MLA, sigmoid router in 4 groups, 8 toy experts top-2 + shared
    assert ds.status == "ok", ds.detail
    # forward per token: q down 2 x 64 x 32 and up 2 x 32 x 4 x 24, kv down 2 x 64 x 24 and up
    # 2 x 16 x 4 x 32, projection 2 x 64 x 64, router 2 x 64 x 8, two experts and the shared one
    # 3 x 2 x 3 x 64 x 32, the norms the cost model counts as active (input, pre-MLP, the q and kv
    # latents', final: 2 x (64 + 64 + 32 + 16 + 64));
    # attention 2 x 4 heads x (24 + 16) x 32 tokens; x 32 tokens, x 3 with the backward
    mla = 2 * 64 * 32 + 2 * 32 * 96 + 2 * 64 * 24 + 2 * 16 * 128 + 2 * 64 * 64
    per_token = mla + 2 * 64 * 8 + 3 * 2 * 3 * 64 * 32 + 2 * (64 + 64 + 32 + 16 + 64) + 2 * 4 * 40 * 32
    assert ds.figures["flops_per_step"] == 3.0 * 32 * per_token
    for name in (
        "flux1_block/double/bf16",
        "flux1_block/single/bf16",
        "llama2_lora_layer/bf16",
        "llama2_lora_layer/torch-scaled_mm/fp8",
        "sd_unet_step",
        "rgat_step",
    ):
        assert by_name[name].status == "ok", by_name[name].detail
        assert by_name[name].figures["flops_per_step"] > 0
    assert by_name["llama2_lora_layer/bf16"].figures["trainable_params"] > 0
    assert by_name["rgat_step"].figures["batch_edges"] > 0
    for name in ("gpt3_layer/mcore-te/fp8", "llama31_layer/mcore-te/fp8", "llama2_lora_layer/torchao/fp8"):
        assert by_name[name].status == "skipped" and "needs CUDA" in by_name[name].detail


def test_smoke_builds_a_run_for_every_benchmark_and_gpu_only_switch(smoke):
    from benchmarks import get, runs
    from benchmarks.base import gpu_only

    _, by_name = smoke
    dry = [c for c in by_name.values() if c.kind in ("run", "switch") and c.status == "ok"]
    # the one dry run is the first job, the longest: a compile run (SD cuda_graphs where triton is
    # installed, as beside a CUDA build of torch; else llama2's compile)
    first = jobs("dgx-h100x1")[0][0].name
    assert first in ("switch/stable_diffusion/cuda_graphs", "switch/llama2_70b_lora/compile"), first
    assert len(dry) == 1 and dry[0].name == first, [c.name for c in dry]
    assert by_name["gpu_tests"].path.startswith("python -m pytest -q -m gpu tests/gpu")
    n_runs = 0
    for bench in runs():
        assert f"tiny/{bench}" in by_name
        cls = get(bench).config
        also = [k for k in GPU_ALSO if k in cls.model_fields and k not in gpu_only(cls)]
        for key in [*gpu_only(cls), *also]:
            c = by_name[f"switch/{bench}/{key}"]
            sw = cls.SWITCHES.get(key)
            lib = sw.library if sw else None
            if c.status == "refused":  # before launch, with the harness's one line: TP/CP >= 2 or
                # a library that is not installed here (as `mlperf run` refuses it)
                assert "\n" not in c.detail, c.detail
                missing = lib is not None and importlib.util.find_spec(lib) is None
                assert (">= 2" in c.detail or "CP 2" in c.detail) or (missing and lib in c.detail), c.detail
                continue
            n_runs += 1
            assert c.path.startswith(f"mlperf run {bench} --system dgx-h100x1 --nproc-per-node 1 --size tiny")
            assert c.path.removesuffix(" --dry-run").endswith(f"--set {key}={on_value(cls, key)}")
            for need in sw.needs if sw else ():
                assert f"--set {need}={on_value(cls, need)}" in c.path
    assert n_runs >= len(runs())  # the GPU precision of each, and the switches one GPU runs


def test_jobs_run_longest_first_and_sd_uses_a_micro_batch_that_fits():
    from bench.gpu.runs import jobs
    from bench.gpu.steps import sd_micro_batch

    todo, _ = jobs("dgx-h200x1")
    costs = [j.expected_s for j in todo]
    assert costs == sorted(costs, reverse=True) and todo[-1].bench == "gpt3"
    assert sd_micro_batch(64, 139.8) == (32, pytest.approx(97.5))  # H200: 64 would need ~180 GiB
    assert sd_micro_batch(64, 79.1)[0] == 16 and sd_micro_batch(4, 139.8)[0] == 4


def test_the_json_is_rewritten_after_every_check(tmp_path, monkeypatch):
    """A script cut short mid-stage (the device call's timeout) still leaves the checks that ended."""
    from bench.gpu import steps
    from bench.gpu.report import Check

    def cut_short(ctx, system):
        yield Check(name="sd_unet_step", kind="step", status="ok")
        raise KeyboardInterrupt  # what the timeout's signal does to the stage

    monkeypatch.setattr(steps, "checks", cut_short)
    with pytest.raises(KeyboardInterrupt):
        gpu_check.main(["--out", str(tmp_path), "--device", "cpu", "--smoke", "--only", "steps"])
    doc = Report.model_validate_json((tmp_path / "gpu_check.json").read_text())
    assert [c.name for c in doc.checks] == ["sd_unet_step"]


def test_on_values_are_what_a_user_would_set():
    from benchmarks import get

    gpt3, sd = get("gpt3").config, get("stable_diffusion").config
    assert on_value(gpt3, "fp8") == "true" and on_value(gpt3, "precision") == "bf16"
    assert on_value(sd, "precision") == "fp16" and on_value(gpt3, "context_parallel_size") == "2"


def test_gpt_layer_flops_equal_torch_flop_counter():
    h, heads, ffn, b, s = 64, 4, 256, 2, 32
    layer = TorchGptLayer(h, heads, ffn)
    x = torch.randn(b, s, h, requires_grad=True)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        layer(x).sum().backward()
    assert counter.get_total_flops() == flops.gpt_layer_flops(b, s, h, ffn)


def test_linear_flops_count_no_weight_gradient_for_frozen_weights():
    tokens, h, r = 32, 64, 8
    base, down, up = nn.Linear(h, h), nn.Linear(h, r, bias=False), nn.Linear(r, h, bias=False)
    base.requires_grad_(False)  # a LoRA layer: frozen base, trained adapter
    x = torch.randn(tokens, h, requires_grad=True)
    with FlopCounterMode(display=False) as counter:
        (base(x) + up(down(x))).sum().backward()
    assert counter.get_total_flops() == flops.linear_flops(nn.ModuleList([base, down, up]), tokens)
    assert flops.attention_flops(2, 16, 64) == 3 * 4 * 2 * 16 * 16 * 64


def test_fp8_linear_is_close_to_the_exact_one_and_really_quantizes():
    torch.manual_seed(0)
    lin = nn.Linear(64, 48)
    fp8 = Fp8Linear.from_linear(lin)
    x = torch.randn(32, 64, requires_grad=True)
    g = torch.randn(32, 48)
    ref, gx_ref, gw_ref = lin(x), *torch.autograd.grad(lin(x), (x, lin.weight), g)
    out, gx, gw = fp8(x), *torch.autograd.grad(fp8(x), (x, fp8.weight), g)

    def rel(a, b):
        return float((a - b).detach().norm() / b.detach().norm())

    # e4m3 keeps 3 mantissa bits, e5m2 2: a few percent off, never exact.
    for a, b in ((out, ref), (gx, gx_ref), (gw, gw_ref)):
        assert 1e-3 < rel(a, b) < 0.1
    m = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))
    assert swap_linears(m, keep=lambda name, lin: name == "2") == 1
    assert type(m[0]) is Fp8Linear and type(m[2]) is nn.Linear


def test_peaks_come_from_the_systems_and_unknown_gpus_get_none():
    assert flops.system_for_gpu("NVIDIA H200") == "dgx-h200x1"
    assert flops.system_for_gpu("NVIDIA H100 80GB HBM3") == "dgx-h100x1"
    assert flops.system_for_gpu("NVIDIA H100 PCIe") is None
    assert flops.system_for_gpu("NVIDIA A100-SXM4-80GB") is None
    peaks = flops.peak_tflops("NVIDIA H200")
    assert (peaks["bf16"], peaks["fp8"]) == (989.4, 1978.9)
    assert flops.peak_tflops("NVIDIA A100-SXM4-80GB") == {}
    assert flops.mfu(989.4e12 / 2, 1.0, 989.4) == pytest.approx(0.5)
    assert flops.mfu(1e12, 1.0, None) is None


def test_the_note_names_the_offline_install_with_the_project_pins():
    doc = SCRIPT.read_text()
    assert "python3 bench/gpu_check.py --out DIR" in doc and "--target /tmp/site .whl/*.whl" in doc
    setup = (REPO / "setup.py").read_text()
    assert "mlperf-logging==4.1.68" in doc and "mlperf-logging==4.1.68" in setup
    # the megatron-core release the GPU machine gets is one that setup.py's tested range admits
    carried = re.search(r"megatron-core==([0-9.]+)", doc).group(1)
    allowed = SpecifierSet(re.search(r'"megatron-core([^"]+)"', setup).group(1))
    assert carried in allowed, (carried, allowed)
    # the rehearsal downloads exactly the wheels the note names
    rehearse = (REPO / "bench" / "gpu_rehearse.sh").read_text()
    travel = rehearse.split("TRAVEL=(", 1)[1].split(")", 1)[0].split()
    assert len(travel) >= 10 and all(f" {w}" in doc for w in travel), travel


@pytest.mark.parametrize("single", [False, True], ids=["double", "single"])
def test_flux_block_flops_equal_torch_flop_counter(single):
    """The GPU script's FLUX.1 rows divide by flops.flux_block_flops: the toy blocks' measured count."""
    from diffusers.models.transformers.transformer_flux import (
        FluxSingleTransformerBlock,
        FluxTransformerBlock,
    )

    heads, hd, n, m, b = 4, 16, 16, 8, 2
    d = heads * hd
    block = (FluxSingleTransformerBlock if single else FluxTransformerBlock)(d, heads, hd)
    x, c, temb = (torch.randn(*s, requires_grad=True) for s in ((b, n, d), (b, m, d), (b, d)))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        enc, hid = block(x, c, temb)
        (enc.sum() + hid.sum()).backward()
    assert counter.get_total_flops() == flops.flux_block_flops(b, n + m, d, single)
