"""The FLUX.1 training loop: rectified flow on VAE latents, validation loss at a fixed cadence.

    init (untimed): header -> both splits' first rows checked, the empty caption's encodings, the
                    transformer (FSDP2 or DDP over all ranks) and AdamW -> init_stop
    run  (timed):   run_start -> steps; every ceil(eval_every_samples / GBS) steps block_stop,
                    eval_start, eval_accuracy{samples_count} (open division: also
                    averaged_validation_loss, the open file's key), eval_stop -> stop at the target
                    (success) or train_samples_cap (aborted).
One step, per sample (the reference's train_step): a latent z = mean + exp(logvar / 2) x N(0, 1),
x0 = (z - shift) x scale packed into 2x2 tokens; t ~ U(0, 1); x_t = (1 - t) x0 + t noise; the
transformer predicts the velocity noise - x0 (MSE); the caption's encodings are replaced by the empty
caption's with probability caption_dropout. The loss is read back only at evaluations.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from benchmarks.flux1.config import Flux1Config
from harness.core.benchmark import RunOutcome
from harness.train import dcp_state
from harness.train.adamw import adamw
from harness.train.batch_order import BatchOrder
from harness.train.run_checkpoint import RunCheckpointer
from harness.train.runtime import Runtime
from harness.train.timings import Timings
from reference_impls import tiny_images
from reference_impls.flux1 import data
from reference_impls.flux1 import model as M
from reference_impls.flux1.evaluate import Validation

# What the log header lists after global_batch_size and gradient_accumulation_steps (rt.hyperparameters).
HYPERPARAMETERS = (
    "opt_name",
    "opt_adamw_beta_1",
    "opt_adamw_beta_2",
    "opt_adamw_epsilon",
    "opt_adamw_weight_decay",
    "opt_base_learning_rate",
    "opt_learning_rate_warmup_steps",
    "opt_gradient_clip_norm",
    "evaluation_frequency",
)


def build(rt, cfg):
    """(model as the loop calls it, the module whose parameters AdamW steps)."""
    dev = torch.device(rt.device)
    torch.manual_seed(rt.plan.seed)
    model = M.build(cfg).to(dev)
    if rt.world_size == 1:
        return model, model
    if cfg.fsdp:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(dev.type, (rt.world_size,), mesh_dim_names=("dp",))
        M.shard_fsdp(model, mesh, cfg)
        return model, model
    ids = [rt.local_rank] if dev.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids), model


def run(rt: Runtime[Flux1Config]) -> RunOutcome:
    plan, cfg, log = rt.plan, rt.cfg, rt.log
    layout, dev = plan.layout, torch.device(rt.device)
    log.header(plan, rt.hyperparameters(*HYPERPARAMETERS))
    train, val = data.splits(cfg, plan.data_dir)
    empty_t5, empty_clip = (t.to(dev) for t in data.empty_encodings(cfg, plan.data_dir))
    # (shift, scale): the fields, each null one (tiny) from the prepared VAE's config
    shift, scale = tiny_images.vae_factors(
        cfg.vae_shift_factor, cfg.vae_scale_factor, Path(plan.data_dir) / cfg.vae_dir, data.TINY_ORIGIN
    )
    log.event("train_samples", train.n)
    log.event("eval_samples", cfg.eval_samples)
    model, module = build(rt, cfg)
    params = [p for p in module.parameters() if p.requires_grad]
    opt = adamw(cfg, params)
    validation = Validation(cfg, val, rt, shift, scale)
    img_ids, txt_ids = M.image_ids(cfg.latent_size, dev), M.text_ids(cfg.text_max_length, dev)
    ck = RunCheckpointer(rt, cfg.checkpoint_interval_steps, sharded=dcp_state.run_state(module, opt))
    resumed = ck.resume()  # the data order and every draw are functions of the step: nothing else to restore
    first = resumed["step"] if resumed else 0
    target = plan.target["validation_loss"]
    open_division = plan.submission.division == "open"
    log.init_stop()

    log.run_start()
    seed = plan.seed + cfg.seed_offset
    order = BatchOrder(train.n, cfg.global_batch_size, seed)
    mbs, ga, interval = layout.micro_batch_size, layout.grad_accum, cfg.eval_interval_steps
    timings = Timings(rt)
    samples, success = first * cfg.global_batch_size, False
    loss_sum = torch.zeros((), device=dev)
    if not plan.resume_from:  # a resumed run's open block_start is in the log already
        log.start("block_start", metadata={"samples_count": 0})
    model.train()
    try:
        step = first
        while samples < cfg.train_samples_cap and not rt.should_stop(step):
            t0 = time.perf_counter()
            rows = order.rank_batch(step, rt.rank, rt.world_size)
            wait = 0.0
            for micro in range(ga):
                tw = time.perf_counter()
                mine = rows[micro * mbs : (micro + 1) * mbs]
                b = {k: v.to(dev, non_blocking=True) for k, v in train.batch(mine).items()}
                # the samples' positions in the run's stream: their draws do not depend on the layout
                first_pos = step * cfg.global_batch_size + rt.rank * len(rows) + micro * mbs
                eps, noise, uni = M.draws(
                    seed, range(first_pos, first_pos + len(mine)), tuple(b["mean"].shape[1:])
                )
                wait += time.perf_counter() - tw
                x0 = M.latents(b["mean"], b["logvar"], eps.to(dev), shift, scale)
                noise = M.pack(noise.to(dev))
                t, drop = uni[:, 0].to(dev), (uni[:, 1] < cfg.caption_dropout).to(dev)
                t5 = torch.where(drop[:, None, None], empty_t5, b["t5_encodings"])
                clip = torch.where(drop[:, None], empty_clip, b["clip_encodings"])
                with _sync(model, rt, cfg, last=micro == ga - 1), M.autocast(cfg, rt.device):
                    pred, velocity = M.flow(model, x0, noise, t, t5, clip, img_ids, txt_ids)
                    loss = F.mse_loss(pred, velocity) / ga
                loss.backward()
                loss_sum += loss.detach()
            torch.nn.utils.clip_grad_norm_(params, cfg.opt_gradient_clip_norm)
            for g in opt.param_groups:
                g["lr"] = cfg.lr_at(step)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            samples += cfg.global_batch_size
            at_eval = step % interval == 0
            mean_loss = _mean(loss_sum, rt) / interval if at_eval else None  # the only read-back
            timings.row(step, time.perf_counter() - t0, wait, samples=cfg.global_batch_size, loss=mean_loss)
            if not at_eval:
                continue
            loss_sum.zero_()
            timings.flush()
            log.end("block_stop", metadata={"samples_count": samples})
            log.start("eval_start", metadata={"samples_count": samples})
            value = validation(model)
            log.event("eval_accuracy", value, metadata={"samples_count": samples})
            if open_division:  # open_flux1.yaml's key for the same number (rcp_checker reads eval_accuracy)
                log.event("averaged_validation_loss", value, metadata={"samples_count": samples})
            log.end("eval_stop", metadata={"samples_count": samples})
            if rt.is_rank0:
                print(
                    f"step {step} samples {samples} loss {mean_loss:.4f} validation {value:.4f}", flush=True
                )
            if value <= target:
                success = True
                log.run_stop(True, metadata={"samples_count": samples})
                break
            log.start("block_start", metadata={"samples_count": samples})
            if ck.due(step):  # after block_start: the resumed run's log goes on from here
                ck.save(step, None, {"samples_count": samples})
        if not success:
            log.end("block_stop", metadata={"samples_count": samples})
            log.run_stop(False, metadata={"samples_count": samples})
    finally:
        timings.close()
    return RunOutcome(success)


def _sync(model, rt, cfg, last: bool):
    """Gradient accumulation: reduce the gradients over ranks only after the last micro-batch."""
    if rt.world_size == 1:
        return contextlib.nullcontext()
    if cfg.fsdp:
        model.set_requires_gradient_sync(last)  # FSDP2: skip the reduce-scatter until the last
        return contextlib.nullcontext()
    return contextlib.nullcontext() if last else model.no_sync()


def _mean(loss_sum: torch.Tensor, rt) -> float:
    """The training loss over all ranks (each rank's is over its share of the batch)."""
    t = loss_sum.detach().clone()
    if rt.world_size > 1:
        dist.all_reduce(t)
        t /= rt.world_size
    return float(t)
