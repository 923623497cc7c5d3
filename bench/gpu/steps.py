"""One training step of the SD v2 UNet and of R-GAT at full size on one GPU.

Both take their config from the harness itself: the full-size config resolved for the 1-GPU system
(`mlperf run BENCH --system dgx-h200x1 --nproc-per-node 1 --dry-run` shows the same), so micro-batch,
precision and the GPU-only switches are the tuned ones; the smoke test resolves the tiny config.

- SD: the benchmark's UNet (`model.build_unet`), v-prediction MSE on random latents and text states
  of the real shapes, autocast in the config's precision (GradScaler for fp16), AdamW, with
  channels_last / flash attention as configured. The micro-batch is NOT the config's: dgx-h200x1's
  64 needs ~166 GiB of activations (the shipped configs use no activation checkpointing) on a
  141 GB card, so the step runs at the largest halving that fits (`sd_micro_batch`: 32 on an H200,
  ~97 GiB estimated) and its row gives `micro_batch`, `config_micro_batch` and why;
  `samples_per_s` is the figure that compares across micro-batches. `cuda_graphs` (torch.compile
  "reduce-overhead") is not applied here: compiling the full UNet takes minutes; the tiny switch
  run turns it on.
- R-GAT: the benchmark's `RGAT` (PyG HeteroConv of GATConv) on a mini-batch drawn by the benchmark's
  own `HeteroNeighborSampler` from a random graph with IGBH's relations (about 1 M papers, IGBH-Full
  node-type proportions, the synthetic mean degrees of the config), fan-out and micro-batch as
  configured, 1024-wide random features (cast through e4m3 when fp8_features), bf16 autocast when
  amp, Adam. The graph is random, so nodes per batch are not IGBH's; the figures give them.
FLOPs are counted by `torch.utils.flop_counter` over one step (matmuls, convolutions, attention).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from bench.gpu import flops
from bench.gpu.report import Check
from bench.gpu.timing import peak_memory_gib, reset_memory, time_steps

SMOKE_BATCH = 2  # the CPU smoke test: tiny config, two samples per step

# Memory of one SD v2 UNet training step (fp16 autocast, flash attention, channels_last; the shipped
# configs use no activation checkpointing), in GiB: activations ~166 at micro-batch 64 (issue 20's
# figure for the 64x64x4 latents), i.e. ~2.6 per sample, linear in the batch; plus what does not
# depend on the batch: fp32 weights, gradients and AdamW's two moments, 16 B x 865.9 M = 12.9, and
# autocast's fp16 weight copies, 1.6.
SD_ACT_GIB_PER_SAMPLE = 166 / 64
SD_STATE_GIB = 14.5
SD_MEM_FRACTION = 0.85  # the rest: CUDA context, cuDNN workspaces, allocator fragmentation


def sd_micro_batch(config_mbs: int, card_gib: float) -> tuple[int, float]:
    """(micro-batch, its estimated GiB): the config's, halved until the estimate fits 85% of the card.
    dgx-h200x1's 64 is ~180 GiB on a 139.8 GiB H200 -> 32, ~97.5 GiB (16 on an 80 GB H100)."""
    b = config_mbs
    while b > 1 and SD_STATE_GIB + b * SD_ACT_GIB_PER_SAMPLE > SD_MEM_FRACTION * card_gib:
        b //= 2
    return b, SD_STATE_GIB + b * SD_ACT_GIB_PER_SAMPLE


def resolved_config(bench: str, system: str, smoke: bool):
    """The typed config `mlperf run` would use: full on the 1-GPU system, tiny on cpu-local for smoke."""
    from benchmarks import get
    from harness.run.execute import resolve

    b = get(bench)
    if smoke:
        plan = resolve(b, "cpu-local", "tiny", runs=1, seed=0).plans[0]
    else:
        plan = resolve(b, system, "full", runs=1, seed=0, nproc_per_node=1).plans[0]
    return b.typed(plan.config)


def counted_flops(step) -> float:
    with FlopCounterMode(display=False) as counter:
        step()
    return float(counter.get_total_flops())


def _finish(ctx, step, samples: int, peak_key: str | None, extra: dict) -> dict:
    flop = counted_flops(step)  # untimed; also a warm-up step
    timing = time_steps(step, ctx.device, ctx.warmup, ctx.iters)
    peak = ctx.peaks.get(peak_key) if peak_key else None
    return {
        **timing,
        "samples_per_s": samples / timing["step_s"],
        "flops_per_step": flop,
        "tflops": flop / timing["step_s"] / 1e12,
        "mfu": flops.mfu(flop, timing["step_s"], peak),
        "mfu_peak": peak_key if peak else None,
        "peak_mem_gib": peak_memory_gib(ctx.device),
        **extra,
    }


def sd_step(ctx, system: str) -> dict:
    from reference_impls.stable_diffusion import model

    cfg = resolved_config("stable_diffusion", system, ctx.smoke)
    dev, cuda = ctx.device, ctx.device.startswith("cuda")
    card = torch.cuda.get_device_properties(0).total_memory / 2**30 if cuda else 0.0
    b, est = (SMOKE_BATCH, None) if ctx.smoke else sd_micro_batch(cfg.micro_batch_size, card)
    reset_memory(dev)
    torch.manual_seed(0)
    with torch.device(dev):
        unet = model.build_unet(cfg)
    if cuda and cfg.channels_last:
        unet = unet.to(memory_format=torch.channels_last)
    opt = model.optimizer(cfg, unet.parameters())
    autocast, scaler = model.mixed_precision(cfg, dev)  # the training's own (train.py)
    alphas = model.noise_scheduler(cfg).alphas_cumprod.to(dev)
    shape = (b, cfg.latent_channels, cfg.latent_size, cfg.latent_size)
    latents = torch.randn(shape, device=dev)
    cond = torch.randn(b, cfg.text_max_length, cfg.cross_attention_dim, device=dev)

    def step():  # the arithmetic of reference_impls/stable_diffusion/train.py's inner loop
        noise = torch.randn_like(latents)
        t = torch.randint(0, cfg.num_train_timesteps, (b,), device=dev)
        a = alphas[t].view(-1, 1, 1, 1)
        noisy = a.sqrt() * latents + (1 - a).sqrt() * noise
        target = a.sqrt() * noise - (1 - a).sqrt() * latents
        with autocast():
            loss = F.mse_loss(unet(noisy, t, encoder_hidden_states=cond).sample.float(), target)
        (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)

    peak_key = {"fp16": "fp16", "bf16": "bf16"}.get(cfg.precision) if cuda else None
    extra = {
        "micro_batch": b,
        "config_micro_batch": cfg.micro_batch_size,
        "micro_batch_why": (
            "smoke test"
            if ctx.smoke
            else f"the config's {cfg.micro_batch_size} needs ~"
            f"{sd_micro_batch(cfg.micro_batch_size, 1e9)[1]:.0f} GiB (no activation checkpointing); "
            f"{b} is the largest halving within {SD_MEM_FRACTION:.0%} of {card:.1f} GiB"
        ),
        "estimated_mem_gib": est,
        "parameters": sum(p.numel() for p in unet.parameters()),
        "precision": cfg.precision,  # what mixed_precision applied, on either device
        "channels_last": bool(cuda and cfg.channels_last),
        "flash_attention": bool(cuda and cfg.flash_attention),
        "not_applied": "cuda_graphs, distributed_optimizer (see the tiny switch runs)",
    }
    return _finish(ctx, step, b, peak_key, extra)


def random_graph(cfg, papers: int, device: str, gen: torch.Generator):
    """CSC arrays of a uniform random graph with the config's relations and mean degrees."""
    from benchmarks.gnn.config import IGBH_FULL_NODES
    from reference_impls.gnn import data

    scale = papers / IGBH_FULL_NODES["paper"]
    num = {t: max(16, round(n * scale)) for t, n in IGBH_FULL_NODES.items() if t in cfg.num_nodes}
    csc = {}
    for s, r, d in data.relations(num):
        e = round(num[s] * cfg.synth_edges_per_paper.get(r, 1.0))
        src = torch.randint(0, num[s], (e,), generator=gen)
        dst = torch.randint(0, num[d], (e,), generator=gen)
        pairs = [((s, r, d), src, dst)]
        if r == "cites":  # symmetric, as the loader makes it
            pairs = [((s, r, d), torch.cat([src, dst]), torch.cat([dst, src]))]
        else:
            pairs.append(((d, f"rev_{r}", s), dst, src))
        for et, a, z in pairs:
            indptr, indices = data.to_csc(a.numpy(), z.numpy(), num[et[2]])
            csc[et] = (torch.from_numpy(indptr).to(device), torch.from_numpy(indices).to(device))
    return csc, num


def rgat_step(ctx, system: str) -> dict:
    from reference_impls.gnn.model import RGAT
    from reference_impls.gnn.sampler import HeteroNeighborSampler

    cfg = resolved_config("gnn", system, ctx.smoke)
    dev, cuda = ctx.device, ctx.device.startswith("cuda")
    b = SMOKE_BATCH if ctx.smoke else cfg.micro_batch_size
    reset_memory(dev)
    gen = torch.Generator().manual_seed(0)
    csc, num = random_graph(cfg, 200 if ctx.smoke else 1_000_000, dev, gen)
    sampler = HeteroNeighborSampler(csc, num, cfg.fan_out, torch.Generator(device=dev).manual_seed(0))
    batch = sampler.sample(torch.randperm(num["paper"], generator=gen)[:b])
    fp8 = bool(cuda and cfg.fp8_features)
    xs = {}
    for t, ids in batch.nodes.items():
        x = torch.randn(ids.numel(), cfg.in_channels, device=dev)
        xs[t] = x.to(torch.float8_e4m3fn).float() if fp8 else x
    y = torch.randint(0, cfg.num_classes, (b,), device=dev)
    with torch.device(dev):
        net = RGAT.from_config(cfg)  # the edge types of cfg.num_nodes: those of the random graph
    opt = torch.optim.Adam(net.parameters(), lr=cfg.opt_base_learning_rate)
    amp = bool(cuda and cfg.amp)
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if amp else contextlib.nullcontext

    def step():
        with autocast():
            loss = F.cross_entropy(net(xs, batch.edge_index, b).float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    extra = {
        "micro_batch": b,
        "fan_out": list(cfg.fan_out),
        "batch_nodes": sum(int(v.numel()) for v in batch.nodes.values()),
        "batch_edges": batch.num_edges(),
        "graph_nodes": sum(num.values()),
        "amp_bf16": amp,
        "fp8_features": fp8,
    }
    return _finish(ctx, step, b, "bf16" if amp else None, extra)


def checks(ctx, system: str) -> Iterator[Check]:
    """One check at a time, as it is measured."""
    yield ctx.measure(
        "sd_unet_step",
        "step",
        "diffusers UNet2DConditionModel (benchmark's build_unet), full config of the 1-GPU system, "
        "micro-batch that fits one GPU (sd_micro_batch)",
        lambda: sd_step(ctx, system),
    )
    yield ctx.measure(
        "rgat_step",
        "step",
        "PyG RGAT (benchmark's model) on a batch from the benchmark's sampler over a random graph",
        lambda: rgat_step(ctx, system),
    )
