"""The megatron-core CPU layer: maps torch.cuda uses to the CPU, and is a no-op with CUDA.

Each case runs in a fresh interpreter: enable() patches torch process-wide."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _py(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_enable_maps_cuda_to_cpu_and_is_idempotent():
    r = _py("""
        import torch
        from reference_impls.megatron_gpt import cpu_compat
        assert not torch.cuda.is_available()
        assert cpu_compat.enable() > 0 and cpu_compat.enable() == 0 and cpu_compat.is_enabled()
        assert torch.cuda.current_device() == "cpu"
        assert torch.zeros(2, device="cuda").device.type == "cpu"
        assert torch.ones(1).cuda().device.type == "cpu"
        torch.cuda.synchronize()
        # megatron's dtype checks compare with CUDA type names; other calls of .type() are untouched
        assert torch.ones(1).type() == "torch.cuda.FloatTensor" and torch.ones(1).type(torch.int).dtype == torch.int
        import megatron.core.optimizer.optimizer as mopt  # megatron's own clip, its assert passes
        p = torch.nn.Parameter(torch.ones(4)); p.grad = torch.full((4,), 2.0)
        mopt.clip_grad_by_total_norm_fp32([p], max_norm=1.0, total_norm=4.0)
        assert torch.allclose(p.grad, torch.full((4,), 0.5), atol=1e-5)
        # the torch norm under sequence parallel: built, and its params marked for the TP grad sum
        from megatron.core.transformer.transformer_config import TransformerConfig
        from megatron.core.transformer.torch_norm import WrappedTorchNorm
        cfg = TransformerConfig(num_layers=1, hidden_size=8, num_attention_heads=2,
                                tensor_model_parallel_size=2, sequence_parallel=True)
        norm = WrappedTorchNorm(cfg, 8)
        assert isinstance(norm, torch.nn.LayerNorm) and cfg.sequence_parallel
        assert all(p.sequence_parallel for p in norm.parameters())
        # activation recompute reruns a forward inside backward, where the mode is off
        from megatron.core.tensor_parallel.random import checkpoint
        x = torch.ones(3, requires_grad=True)
        checkpoint(lambda t: t * torch.ones(3, device="cuda"), False, x).sum().backward()
        assert torch.equal(x.grad, torch.ones(3))
    """)
    assert r.returncode == 0, r.stderr[-3000:]


def test_an_unmapped_cuda_call_names_its_call_site():
    """What a megatron upgrade adds on the CPU path (a new torch.cuda call) must fail with the call
    site to patch, not with torch's "Found no NVIDIA driver". The CUDA stream megatron-core 0.19
    added to every grad sync is mapped (patch 11); a device query or `.to("cuda")` is not."""
    r = _py("""
        import torch
        from reference_impls.megatron_gpt import cpu_compat
        if not hasattr(torch._C, "_cuda_init"):
            raise SystemExit(0)  # a CPU-only torch build: torch's own assertion fails first
        cpu_compat.enable()
        torch.cuda.current_stream().wait_stream(torch.cuda.current_stream())  # patch 11
        for call in ("torch.cuda.get_device_properties(0)", "torch.ones(1).to('cuda')"):
            try:
                eval(call)
            except cpu_compat.UnpatchedCudaCall as e:
                print(e)
            else:
                raise SystemExit(f"an unmapped CUDA call passed: {call}")
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and all(ln.startswith("cpu_compat: <string>:") for ln in lines), r.stdout
    assert all("reference_impls/megatron_gpt/cpu_compat.py" in ln for ln in lines), r.stdout


def test_noop_when_cuda_is_available():
    r = _py("""
        import torch
        torch.cuda.is_available = lambda: True
        before = torch.cuda.current_device
        from reference_impls.megatron_gpt import cpu_compat
        assert cpu_compat.enable() == 0 and not cpu_compat.is_enabled()
        assert torch.cuda.current_device is before
        from torch.overrides import _get_current_function_mode_stack
        assert not _get_current_function_mode_stack()
    """)
    assert r.returncode == 0, r.stderr[-3000:]


def test_gptmodel_checkpoint_round_trip_and_schedule_continuation():
    r = _py("""
        import os, torch, torch.distributed as dist
        from benchmarks.gpt3.config import Gpt3Config
        from harness.core.layout import Layout
        from reference_impls.megatron_gpt import model as gm, train
        from harness.train.runtime import init_one_process_group
        init_one_process_group("gloo")
        cfg = Gpt3Config(num_layers=2, hidden_size=32, num_attention_heads=4, ffn_hidden_size=64,
                         max_sequence_length=16, vocab_size=64, global_batch_size=4, micro_batch_size=4,
                         opt_base_learning_rate=1e-2, reference_global_batch_size=4, reference_warmup_steps=3,
                         reference_decay_steps=20, reference_checkpoint_step=5, precision="fp32")
        lay = Layout(nodes=1, procs_per_node=1, world_size=1, tp=1, pp=1, vp=1, cp=1, dp=1,
                     micro_batch_size=4, global_batch_size=4, grad_accum=1)
        train.init_parallel(lay, 1)
        m, o, s, t = gm.build(cfg, lay, "cpu")
        st = train.Stepper(m, o, s, t, cfg, lay, "cpu")
        tok = torch.randint(0, 64, (4, 16), generator=torch.Generator().manual_seed(0))
        b = {"tokens": tok, "labels": tok.roll(-1, 1), "loss_mask": torch.ones(4, 16),
             "position_ids": torch.arange(16).expand(4, 16)}
        for _ in range(3):
            st.train_step([b])
        state = gm.tiny_state(m, o, 3, 12)
        m2, o2, s2, _ = gm.build(cfg, lay, "cpu")
        gm.load_tiny_state(m2, o2, state)
        for (n1, p1), (n2, p2) in zip(m[0].module.named_parameters(), m2[0].module.named_parameters()):
            assert n1 == n2 and torch.equal(p1, p2), n1
        assert gm.tiny_state(m2, o2, 3, 12)["adam"].keys() == state["adam"].keys()
        # the distributed optimizer keeps moments per shard of the flat buffer: they load there too
        m3, o3, _, _ = gm.build(cfg.model_copy(update={"distributed_optimizer": True}), lay, "cpu")
        gm.load_tiny_state(m3, o3, state)
        back = gm.tiny_state(m3, o3, 3, 12)["adam"]
        assert back.keys() == state["adam"].keys()
        for k, a in state["adam"].items():
            assert torch.equal(back[k]["exp_avg"], a["exp_avg"]) and back[k]["step"] == a["step"], k
            assert torch.equal(back[k]["exp_avg_sq"], a["exp_avg_sq"]), k
        for step in (0, 2, 5, 11, 20, 30):
            gm.set_schedule_step(s2, step)
            want = gm.cosine_lr(step, 1e-2, 1e-3, 3, 20)
            assert abs(o2.param_groups[0]["lr"] - want) < 1e-9, (step, o2.param_groups[0]["lr"], want)
        train._teardown()
    """)
    assert r.returncode == 0, r.stderr[-3000:]
