"""GPU smoke test of the GPT-3 reference (skipped without CUDA): the CPU layer stays off, and the
tiny model trains on the GPU through the same Stepper, the TE spec when Transformer Engine exists."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.gpu
def test_tiny_model_trains_on_cuda_without_the_cpu_layer():
    code = textwrap.dedent("""
        import os, torch, torch.distributed as dist
        from benchmarks.gpt3.config import Gpt3Config
        from harness.core.layout import Layout
        from reference_impls.megatron_gpt import cpu_compat, model as gm, train
        assert torch.cuda.is_available() and cpu_compat.enable() == 0
        from harness.train.runtime import init_one_process_group
        init_one_process_group("nccl")
        torch.cuda.set_device(0)
        cfg = Gpt3Config(num_layers=2, hidden_size=64, num_attention_heads=4, ffn_hidden_size=256,
                         max_sequence_length=64, vocab_size=256, global_batch_size=16, micro_batch_size=16,
                         opt_base_learning_rate=3e-3, reference_global_batch_size=16, reference_warmup_steps=10,
                         reference_decay_steps=600, reference_checkpoint_step=150, precision="bf16")
        lay = Layout(nodes=1, procs_per_node=1, world_size=1, tp=1, pp=1, vp=1, cp=1, dp=1,
                     micro_batch_size=16, global_batch_size=16, grad_accum=1)
        train.init_parallel(lay, 1)
        m, o, s, t = gm.build(cfg, lay, "cuda:0")
        assert next(m[0].parameters()).is_cuda and not cpu_compat.is_enabled()
        st = train.Stepper(m, o, s, t, cfg, lay, "cuda:0")
        tok = torch.randint(1, 256, (16, 64), generator=torch.Generator().manual_seed(0))
        b = {"tokens": tok, "labels": tok.roll(-1, 1), "loss_mask": torch.ones(16, 64),
             "position_ids": torch.arange(64).expand(16, 64)}
        first = st.reduce_loss(st.train_step([b]))
        for _ in range(30):
            last = st.reduce_loss(st.train_step([b]))
        assert last < first, (first, last)
        train._teardown()
    """)
    r = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
