"""The Stable Diffusion training loop: v-prediction on VAE latents, checkpoints scored untimed.

Timeline (as the reference and NVIDIA's published logs):
    header .. init_stop, run_start
    block_start{samples_count: s} .. block_stop{samples_count: s + K}     K = checkpoint_every_images
    (checkpoint saved; scored if s + K >= eval_start_images)
        eval_start, eval_accuracy{metric: FID}, eval_accuracy{metric: CLIP}, eval_stop
    ...
    run_stop{status: success}, time_ms back-dated to the first passing checkpoint
Scoring is untimed: the reference scores checkpoints offline after training. Here a checkpoint is
scored where it is saved, and the scoring time is taken out of the training clock: every training
event (block_*, run_stop) is stamped `wall time - time spent scoring so far`, as if the scoring ran
on another machine; eval_* lines carry their real wall time (so they come after run_stop in time,
like NVIDIA's). Training stops at the first passing checkpoint once >= 2 checkpoints are scored
(the checker needs two points), or at train_samples_cap (aborted).
Per-step timings go to <run_dir>/timings.jsonl (harness/train/timings.py); the loss is only read
back at checkpoints.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from benchmarks.stable_diffusion.config import StableDiffusionConfig
from harness.core.benchmark import RunOutcome
from harness.core.errors import HarnessError
from harness.core.mllog import now_ms
from harness.train.run_checkpoint import RunCheckpointer
from harness.train.runtime import Runtime
from harness.train.timings import Timings
from reference_impls.stable_diffusion import data, metrics, model

# What the log header lists after global_batch_size and gradient_accumulation_steps (rt.hyperparameters).
HYPERPARAMETERS = (
    "opt_name",
    "opt_adamw_beta_1",
    "opt_adamw_beta_2",
    "opt_adamw_epsilon",
    "opt_adamw_weight_decay",
    "opt_base_learning_rate",
    "opt_learning_rate_warmup_steps",
)


class Evaluator:
    """Generate one image per evaluation prompt (fixed noise), score FID and CLIP over all ranks."""

    def __init__(self, cfg, plan, rt, vae, text, shift: float, scale: float):
        self.cfg, self.rt, self.vae, self.text, self.shift, self.scale = cfg, rt, vae, text, shift, scale
        prompts = [c for _, c in data.eval_prompts(cfg, plan.data_dir)]
        self.prompts = prompts[rt.rank :: rt.world_size]
        self.mu, self.sigma = data.fid_stats(cfg, plan.data_dir)
        self.scorer = metrics.scorer(cfg, plan.data_dir, rt.device)
        self.sampler = model.sampler(cfg)
        g = torch.Generator().manual_seed(cfg.eval_seed)  # same noise for every checkpoint and run
        shape = (len(prompts), cfg.latent_channels, cfg.latent_size, cfg.latent_size)
        self.noise = torch.randn(shape, generator=g)[rt.rank :: rt.world_size]

    @torch.no_grad()
    def __call__(self, unet, autocast) -> tuple[float, float]:
        cfg, dev = self.cfg, self.rt.device
        unet.eval()
        feats, agree = [], 0.0
        for i in range(0, len(self.prompts), cfg.eval_batch_size):
            caps = self.prompts[i : i + cfg.eval_batch_size]
            x = self.noise[i : i + len(caps)].to(dev)
            cond = self.text(caps)
            guided = cfg.guidance_scale != 1.0
            if guided:
                cond = torch.cat([self.text([model.UNCOND] * len(caps)), cond])
            self.sampler.set_timesteps(cfg.sampling_steps)
            for t in self.sampler.timesteps:
                with autocast():
                    out = unet(
                        torch.cat([x, x]) if guided else x, t, encoder_hidden_states=cond
                    ).sample.float()
                if guided:
                    u, c = out.chunk(2)
                    out = u + cfg.guidance_scale * (c - u)
                x = self.sampler.step(out, t, x).prev_sample
            images = self.vae.decode((x / self.scale + self.shift).to(self.vae.dtype)).sample.clamp(-1, 1)
            f, a = self.scorer.score(images, caps)
            feats.append(f)
            agree += a
        unet.train()
        feats = np.concatenate(feats) if feats else np.zeros((0, 1))
        if self.rt.world_size > 1:
            import torch.distributed as dist

            parts = [None] * self.rt.world_size
            dist.all_gather_object(parts, (feats, agree))
            feats = np.concatenate([p[0] for p in parts])
            agree = sum(p[1] for p in parts)
        mu, sigma = metrics.stats(feats)
        return metrics.frechet_distance(mu, sigma, self.mu, self.sigma), agree / len(feats)


def run(rt: Runtime[StableDiffusionConfig]) -> RunOutcome:
    plan = rt.plan
    cfg = rt.cfg
    dev, log = rt.device, rt.log
    log.header(plan, rt.hyperparameters(*HYPERPARAMETERS))
    log.event("train_samples", cfg.train_samples)
    log.event("eval_samples", cfg.eval_samples)

    # ---- init (untimed): check data, build the frozen models and the UNet -------------------
    data.check_first(cfg, plan.data_dir)
    shift, scale = model.latent_factors(cfg, plan.data_dir)
    torch.manual_seed(plan.seed)
    text = model.TextEncoder(cfg, plan.data_dir).to(dev)
    vae = model.load_vae(cfg, plan.data_dir).to(dev)
    evaluator = Evaluator(cfg, plan, rt, vae, text, shift, scale)
    unet = model.build_unet(cfg).to(dev)
    cuda = dev.startswith("cuda")
    # Every switch but cuda_graphs acts on CPU too (resolve refuses cuda_graphs there): NHWC convs,
    # CPU autocast in fp16/bf16 with a CPU grad scaler, ZeRO over gloo.
    memory_format = torch.channels_last if cfg.channels_last else torch.contiguous_format
    unet = unet.to(memory_format=memory_format)
    ddp = unet
    if rt.world_size > 1:
        ddp = torch.nn.parallel.DistributedDataParallel(unet, device_ids=[rt.local_rank] if cuda else None)
    if cfg.cuda_graphs:
        ddp = torch.compile(ddp, mode="reduce-overhead")  # inductor captures the step in CUDA graphs
    # ZeRO at every world size (the GPU check runs it on one GPU; one rank over gloo on CPU)
    opt = model.optimizer(cfg, unet.parameters(), sharded=cfg.distributed_optimizer)
    autocast, scaler = model.mixed_precision(cfg, dev)
    sched = model.noise_scheduler(cfg)
    alphas = sched.alphas_cumprod.to(dev)
    mbs, ga = plan.layout.micro_batch_size, plan.layout.grad_accum
    stream = data.TrainStream(
        cfg, plan.data_dir, rt.rank, rt.world_size, plan.seed + cfg.seed_offset
    ).batches(mbs)
    gen = torch.Generator(device=dev).manual_seed(plan.seed * 1000 + rt.rank)
    ckpt_dir = Path(plan.run_dir) / "checkpoints"
    interval = cfg.checkpoint_interval_steps
    ck = RunCheckpointer(rt, cfg.resumable_checkpoint_interval_steps)
    resumed = ck.resume(lambda state, meta: _load(state, meta, unet, opt, scaler, gen))
    timings = Timings(rt)
    log.init_stop()
    log.run_start()

    # ---- timed: train; checkpoints scored on a paused clock ---------------------------------
    paused = 0
    clock = lambda: now_ms() - paused  # noqa: E731 - the training clock (wall minus scoring time)
    step = samples = points = 0
    passed: tuple[int, int, int] | None = None  # (samples, time_ms, step) of the first passing checkpoint
    if resumed is not None:
        # Only the scoring time up to the checkpoint is taken out of the clock: everything since
        # (the lost training, any scoring the kill discarded, the restart) counts as training.
        step, samples, points, paused = (
            resumed["step"],
            resumed["samples"],
            resumed["points"],
            resumed["paused_ms"],
        )
        passed = tuple(resumed["passed"]) if resumed["passed"] else None
        for _ in range(step * ga):  # the data position: the stream is deterministic, skip what was seen
            next(stream)
    loss_sum = torch.zeros((), device=dev)
    log.start("block_start", "training_step", {"samples_count": samples}, time_ms=clock())
    try:
        while True:
            t0 = time.perf_counter()
            wait = 0.0
            lr = model.lr_at(cfg, step + 1)
            for group in opt.param_groups:
                group["lr"] = lr
            opt.zero_grad(set_to_none=True)
            for micro in range(ga):
                tw = time.perf_counter()
                moments, captions = next(stream)
                moments = torch.from_numpy(moments).to(dev, non_blocking=True).float()
                wait += time.perf_counter() - tw
                mean, logvar = moments.chunk(2, dim=1)
                noise = torch.randn(mean.shape, generator=gen, device=dev)
                latents = (mean + torch.exp(0.5 * logvar.clamp(-30, 20)) * noise - shift) * scale
                noise = torch.randn(latents.shape, generator=gen, device=dev)
                t = torch.randint(0, cfg.num_train_timesteps, (latents.shape[0],), generator=gen, device=dev)
                a = alphas[t].view(-1, 1, 1, 1)
                noisy = (a.sqrt() * latents + (1 - a).sqrt() * noise).contiguous(memory_format=memory_format)
                target = a.sqrt() * noise - (1 - a).sqrt() * latents  # v = sqrt(a) eps - sqrt(1-a) x0
                cond = text(captions)
                sync = ddp.no_sync() if rt.world_size > 1 and micro < ga - 1 else contextlib.nullcontext()
                with sync, autocast():
                    pred = ddp(noisy, t, encoder_hidden_states=cond).sample
                    loss = F.mse_loss(pred.float(), target) / ga
                (scaler.scale(loss) if scaler else loss).backward()
                loss_sum += loss.detach()
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            step += 1
            samples += cfg.global_batch_size
            dt = time.perf_counter() - t0
            at_ckpt = step % interval == 0
            mean_loss = float(loss_sum) / interval if at_ckpt else None  # the only read-back
            timings.row(step, dt, wait, samples=cfg.global_batch_size, loss=mean_loss)
            if not at_ckpt:
                continue
            loss_sum.zero_()
            timings.flush()
            ckpt_time = clock()
            log.end("block_stop", "training_step", {"samples_count": samples}, time_ms=ckpt_time)
            if rt.is_rank0:
                ckpt_dir.mkdir(parents=True, exist_ok=True)
                torch.save(unet.state_dict(), ckpt_dir / f"unet_{samples}.pt")
                for old in sorted(ckpt_dir.glob("unet_*.pt"), key=lambda p: int(p.stem[5:]))[:-2]:
                    old.unlink()  # keep the last two: the passing one and the one before
            if samples >= cfg.eval_start_images:
                t_eval = now_ms()
                log.start("eval_start", None, {"samples_count": samples}, time_ms=t_eval)
                fid, clip = evaluator(unet, autocast)
                log.event("eval_accuracy", fid, {"samples_count": samples, "metric": "FID"})
                log.event("eval_accuracy", clip, {"samples_count": samples, "metric": "CLIP"})
                log.end("eval_stop", None, {"samples_count": samples})
                paused += now_ms() - t_eval
                points += 1
                ok = fid <= plan.target["FID"] and clip >= plan.target["CLIP"]
                if ok and passed is None:
                    passed = (samples, ckpt_time, step)
                if rt.is_rank0:
                    print(
                        f"step {step} samples {samples} loss {mean_loss:.4f} FID {fid:.2f} CLIP {clip:.4f}"
                        f"{' (target reached)' if ok else ''}",
                        flush=True,
                    )
            if passed and points >= 2:
                break
            # Agreed by all ranks; checked at UNet checkpoints only, so on GPUs too (every_on_gpu=1).
            if samples >= cfg.train_samples_cap or rt.should_stop(step, every_on_gpu=1):
                break
            if ck.due(step):
                ck.save(step, _state(unet, opt, gen), _counters(samples, points, paused, passed, scaler))
            log.start("block_start", "training_step", {"samples_count": samples}, time_ms=clock())
    finally:
        timings.close()
    if passed:
        log.run_stop(True, {"step_num": passed[2]}, time_ms=passed[1])
        return RunOutcome(True)
    return RunOutcome(False)


# ---- resumable run checkpoints (harness/train/run_checkpoint.py; `mlperf run --resume`) -----------
# Taken at a UNet checkpoint once its scoring is logged, before the next block_start, so the log
# offset is consistent: the resumed run starts by logging that block_start. Saved: the UNet, AdamW
# (this rank's shard under ZeroRedundancyOptimizer), the grad scaler, the noise generator, and the
# run's counters (step, samples, scored points, first passing checkpoint, the scoring time taken
# out of the clock so far); every global RNG: RunCheckpointer. The data position is the step: the
# stream is a pure function of the seed, and the resumed run skips the step x GA micro-batches
# already trained on. Timing stays honest: run_start is the original one and only the scoring time
# recorded in the checkpoint is subtracted, so the time lost to the interruption counts as training.


def _local_opt(opt):
    return getattr(opt, "optim", opt)  # ZeroRedundancyOptimizer: this rank's shard


def _state(unet, opt, gen) -> dict:
    return {
        "unet": unet.state_dict(),
        "optimizer": _local_opt(opt).state_dict(),
        "noise_rng": gen.get_state(),
    }


def _counters(samples, points, paused, passed, scaler) -> dict:
    """The run-wide part of a checkpoint (JSON, in its manifest)."""
    return {
        "samples": samples,
        "points": points,
        "paused_ms": int(paused),
        "passed": list(passed) if passed else None,
        "scaler": scaler.state_dict() if scaler else None,
    }


def _load(state: dict, meta: dict, unet, opt, scaler, gen) -> None:
    try:
        unet.load_state_dict(state["unet"])
    except RuntimeError as e:
        raise HarnessError(f"cannot resume: checkpoint does not fit the UNet ({str(e)[:200]})", 2) from None
    _local_opt(opt).load_state_dict(state["optimizer"])
    if scaler and meta.get("scaler"):
        scaler.load_state_dict(meta["scaler"])
    gen.set_state(state["noise_rng"])
