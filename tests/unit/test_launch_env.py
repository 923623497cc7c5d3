"""What a launched process sees: a CPU process never sees a GPU, and a world of one rank needs no port.

Both were found on the first GPU host (an H200): gpt3's tiny pretraining, a CPU job, failed there
because megatron-core put its buffers on the visible GPU; and six one-rank runs started at once
raced for ports found free and bound later (EADDRINUSE)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import benchmarks
from harness.run.execute import resolve
from harness.run.launch.local import _env

REPO = Path(__file__).resolve().parents[2]


def _plan_and_system(system: str):
    r = resolve(benchmarks.get("gpt3"), system, "tiny", runs=1, seed=1, nproc_per_node=1, sets=[])
    return r.plans[0], r.system


def test_a_cpu_plan_hides_the_gpu_and_a_gpu_plan_keeps_it(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    plan, system = _plan_and_system("cpu-local")
    assert plan.device == "cpu" and _env(plan, system)["CUDA_VISIBLE_DEVICES"] == ""
    plan, system = _plan_and_system("dgx-h200x1")
    assert plan.device == "cuda" and _env(plan, system)["CUDA_VISIBLE_DEVICES"] == "0"
    # data preparation runs on the CPU for any system (the same tiny bytes as CI makes)
    assert _env(plan, system, cpu_only=True)["CUDA_VISIBLE_DEVICES"] == ""


def test_a_world_of_one_rank_opens_no_port():
    # With MASTER_ADDR unusable, a TCP rendezvous fails at once; the in-process store does not care.
    code = textwrap.dedent("""
        import torch, torch.distributed as dist
        from harness.train.runtime import init_one_process_group
        init_one_process_group("gloo")
        t = torch.ones(2)
        dist.all_reduce(t)
        assert dist.get_world_size() == 1 and t.tolist() == [1.0, 1.0]
        dist.destroy_process_group()
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "RANK", "WORLD_SIZE")}
    env.update(MASTER_ADDR="256.0.0.1", PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
