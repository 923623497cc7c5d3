"""GPU-only llama2_70b_lora paths (skipped without CUDA): a few LoRA steps at the 70B width in
bf16 and (with torchao) FP8, through bench/gpu_llama2_lora_fp8.py's `measure`."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]


def test_lora_steps_at_70b_width_bf16_then_fp8():
    sys.path.insert(0, str(REPO / "bench"))
    import gpu_llama2_lora_fp8 as g

    args = SimpleNamespace(layers=1, seq=2048, batch=1, steps=2, warmup=1)
    r = g.measure(args, fp8=False)
    assert r["loss_finite"] and r["tokens_per_s"] > 0
    pytest.importorskip("torchao")
    assert g.measure(args, fp8=True)["loss_finite"]
