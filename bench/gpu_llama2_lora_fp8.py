"""A few LoRA steps of a down-scaled Llama 2 70B on one GPU, FP8 off and on: tokens/s and memory.

The model is the benchmark's own (reference_impls/llama2_70b_lora/model.py: fused-QKV
LlamaForCausalLM, LoRA r 16 / alpha 32 / dropout 0.1 on qkv_proj + o_proj, SDPA, activation
checkpointing, bf16 base, fp32 adapters) at the full 70B width (hidden 8192, FFN 28672, 64 / 8
heads, vocab 32000) but only `--layers` decoder layers, random weights, random 8k-token
sequences. FP8 = torchao float8 training on the frozen base linears (needs torchao and SM >= 8.9);
without torchao the FP8 row says so instead of guessing. Budget: < 5 min on one H200
(2 layers: ~4.4 GB of bf16 weights).

    python bench/gpu_llama2_lora_fp8.py [--layers 2] [--seq 8192] [--steps 10] [--warmup 3]

Not run on the CPU development machines; tests/unit/test_llama2_lora.py calls `measure` under
@pytest.mark.gpu.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def measure(args, fp8: bool) -> dict:
    import torch
    import torch.nn.functional as F

    from benchmarks.llama2_70b_lora.config import Llama2LoraConfig
    from reference_impls.llama2_70b_lora import model as M

    dev = getattr(args, "device", "cuda")
    cuda = dev.startswith("cuda")
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    # The 70B width unless `args` shrinks it (the CPU smoke test does).
    width = {
        k: getattr(args, k)
        for k in (
            "hidden_size",
            "intermediate_size",
            "num_attention_heads",
            "num_key_value_heads",
            "vocab_size",
        )
        if hasattr(args, k)
    }
    cfg = Llama2LoraConfig(
        num_layers=args.layers, max_sequence_length=args.seq, precision="bf16", fp8=fp8, **width
    )
    torch.manual_seed(0)
    base = M.build_base(cfg, dev).to(torch.bfloat16)
    M.reset_rope(base, dev)
    if fp8:
        M.convert_fp8(base)
    model = M.apply_lora(base, cfg)
    M.enable_activation_checkpointing(model)
    model.train()
    params = M.trainable_parameters(model)
    opt = torch.optim.AdamW(params, lr=cfg.opt_base_learning_rate, weight_decay=cfg.opt_adamw_weight_decay)
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device=dev)
    labels = ids.roll(-1, dims=1)
    labels[:, : int(args.seq * 0.9)] = -100  # score only the last 10% (the "summary")
    losses, t0 = [], None
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        logits = model(input_ids=ids).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.opt_gradient_clip_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())
    if cuda:
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    vals = [x.item() for x in losses]
    out = {
        "fp8": fp8,
        "layers": args.layers,
        "seq": args.seq,
        "batch": args.batch,
        "steps": args.steps,
        "step_s": dt / args.steps,
        "tokens_per_s": args.batch * args.seq * args.steps / dt,
        "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
        "first_loss": vals[0],
        "last_loss": vals[-1],
        "loss_finite": all(math.isfinite(v) for v in vals),
    }
    del model, base, opt
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("error: needs a CUDA GPU", file=sys.stderr)
        return 2
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    rows = [measure(args, fp8=False)]
    try:
        rows.append(measure(args, fp8=True))
    except Exception as e:  # report why FP8 did not run rather than a traceback
        rows.append({"fp8": True, "error": str(e).splitlines()[0]})
    for r in rows:
        print(json.dumps(r), flush=True)
    if "tokens_per_s" in rows[1]:
        print(
            f"fp8 speed-up: {rows[1]['tokens_per_s'] / rows[0]['tokens_per_s']:.2f}x; "
            f"memory {rows[0]['peak_mem_gib']:.1f} -> {rows[1]['peak_mem_gib']:.1f} GiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
