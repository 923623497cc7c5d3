"""R-GAT training loop: sampled mini-batches, Adam, DDP over ranks, 20 evaluations per epoch.

Per optimizer step every rank takes its DP share of the global batch of seed papers (one shared
shuffle per epoch, drop-last), split into GA micro-batches; each micro-batch is sampled
(`sampler.py`), its features gathered, and run through the model. Evaluation runs after the step
at which the epoch's seeds reach k / evals_per_epoch (k = 1..20), over all validation seeds split
across ranks; `epoch_num` is logged as that fraction (0.05, 0.10, ...), as the reference and
NVIDIA do. The run stops at the first accuracy >= target, or aborts after `max_epochs`.

Host syncs: none per step beyond the rank-agreed stop check (rt.should_stop); the loss is read
only at evaluations. `timings.jsonl` (harness/train/timings.py): data_wait_s is sampling + feature
gather.
"""

from __future__ import annotations

import math
import time
from typing import cast

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from benchmarks.gnn.config import GnnConfig
from harness.core.benchmark import RunOutcome
from harness.core.errors import ConfigError, HarnessError
from harness.train.run_checkpoint import RunCheckpointer
from harness.train.runtime import Runtime
from harness.train.timings import Timings
from reference_impls.gnn import data
from reference_impls.gnn.model import RGAT
from reference_impls.gnn.sampler import HeteroNeighborSampler


def _batch_inputs(graph, batch, device, fp8: bool):
    xs = {}
    for t, ids in batch.nodes.items():
        x = data.gather(graph.features[t], ids.cpu())
        if fp8:  # a memory-mapped fp32 store (full) is quantised here; an FP8 store already is
            x = x.to(torch.float8_e4m3fn)  # e4m3, saturating cast (as the store's)
        xs[t] = x.to(device, non_blocking=True).float()  # FP8 on the wire, upcast on the device
    seeds = batch.nodes[batch.seed_type][: batch.batch_size]
    y = data.gather_labels(graph.labels, seeds.cpu()).to(device, non_blocking=True)
    edges = {et: e.to(device, non_blocking=True) for et, e in batch.edge_index.items()}
    return xs, edges, y


def evaluate(model, graph, sampler, rt, cfg, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(correct, total) over this rank's share of the validation seeds."""
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=device)
    total = 0
    mine = graph.val_idx[rt.rank :: rt.world_size]
    with torch.no_grad(), _autocast(cfg, device):
        for lo in range(0, mine.numel(), cfg.eval_micro_batch_size):
            batch = sampler.sample(mine[lo : lo + cfg.eval_micro_batch_size])
            xs, edges, y = _batch_inputs(graph, batch, device, cfg.fp8_features)
            correct += (model(xs, edges, batch.batch_size).argmax(-1) == y).sum()
            total += y.numel()
    model.train()
    return correct, torch.tensor(total, device=device)


def _autocast(cfg, device):
    """bf16 autocast where the model runs (CUDA or CPU: both have bf16 autocast kernels); off: a no-op."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.amp)


def run(rt: Runtime[GnnConfig]) -> RunOutcome:
    """Run one timed training run: (target reached, run_stop metadata)."""
    plan = rt.plan
    cfg = rt.cfg
    lay = plan.layout
    device = torch.device(rt.device)
    target = plan.target["eval_accuracy"]
    torch.manual_seed(plan.seed + cfg.seed_offset)

    rt.log.header(plan, rt.hyperparameters("opt_name", "opt_base_learning_rate"))
    # Both follow from the config's split arithmetic (checked against the files after run_start).
    rt.log.event("train_samples", cfg.num_train_seeds)
    rt.log.event("eval_samples", cfg.num_val_seeds)

    net = RGAT.from_config(cfg).to(device)
    ddp = rt.world_size > 1
    model: torch.nn.Module = torch.nn.parallel.DistributedDataParallel(net) if ddp else net
    opt = torch.optim.Adam(model.parameters(), lr=cfg.opt_base_learning_rate)
    steps_per_epoch = cfg.num_train_seeds // cfg.global_batch_size
    if steps_per_epoch < 1:
        raise ConfigError(
            f"global_batch_size {cfg.global_batch_size} exceeds the {cfg.num_train_seeds} "
            f"training seeds; choose a smaller batch"
        )
    eval_at = {
        math.ceil(k * steps_per_epoch / cfg.evals_per_epoch): k for k in range(1, cfg.evals_per_epoch + 1)
    }
    max_steps = math.ceil(cfg.max_epochs * steps_per_epoch)
    rt.log.init_stop()

    rt.log.run_start()  # ---- timed from here: graph and feature loading are timed by the rules
    graph = data.load(plan.data_dir, cfg, in_memory=plan.size == "tiny")
    gen = torch.Generator().manual_seed(plan.seed * 1000 + rt.rank + 1)
    sampler = HeteroNeighborSampler(graph.csc, graph.num_nodes, cfg.fan_out, gen)
    order_gen = torch.Generator().manual_seed(plan.seed + cfg.seed_offset)
    timings = Timings(rt)
    share = lay.micro_batch_size * lay.grad_accum
    step, progress, success, stop = 0, 0.0, False, False
    epoch, first_s, mid_epoch = 0, 0, False
    ck = RunCheckpointer(rt, cfg.checkpoint_interval_steps)
    resumed = ck.resume(lambda state, meta: _load(state, model, opt, gen, order_gen))
    if resumed:  # continue after the evaluation the checkpoint was taken at
        step, epoch = int(resumed["step"]), int(resumed["epoch"])
        first_s, progress = int(resumed["next_step_in_epoch"]), float(resumed["epoch_num"])
        mid_epoch = True  # its epoch_start is in the log already
    try:
        while step < max_steps and not success:
            if not mid_epoch:
                rt.log.start("epoch_start", metadata={"epoch_num": epoch + 1})
            mid_epoch = False
            epoch_order = order_gen.get_state()  # a checkpoint re-draws this epoch's order from it
            perm = graph.train_idx[torch.randperm(graph.train_idx.numel(), generator=order_gen)]
            for s in range(first_s, steps_per_epoch):
                t0 = time.perf_counter()
                gb = perm[s * cfg.global_batch_size : (s + 1) * cfg.global_batch_size]
                mine = gb[rt.rank * share : (rt.rank + 1) * share]
                wait = 0.0
                opt.zero_grad(set_to_none=True)
                loss = torch.zeros((), device=device)  # (GA >= 1: the last microbatch's loss)
                for m in range(lay.grad_accum):
                    t1 = time.perf_counter()
                    batch = sampler.sample(mine[m * lay.micro_batch_size : (m + 1) * lay.micro_batch_size])
                    xs, edges, y = _batch_inputs(graph, batch, device, cfg.fp8_features)
                    wait += time.perf_counter() - t1
                    last = m == lay.grad_accum - 1
                    ctx = cast(DDP, model).no_sync() if ddp and not last else _null()
                    with ctx, _autocast(cfg, device):
                        loss = F.cross_entropy(model(xs, edges, batch.batch_size).float(), y) / lay.grad_accum
                    loss.backward()
                opt.step()
                step += 1
                dt = time.perf_counter() - t0
                train_loss = None
                k = eval_at.get(s + 1)
                stop = rt.should_stop(step)  # agreed by all ranks: they evaluate and stop together
                if k is not None or stop or step >= max_steps:
                    progress = round(
                        epoch
                        + (k if k is not None else (s + 1) * cfg.evals_per_epoch / steps_per_epoch)
                        / cfg.evals_per_epoch,
                        4,
                    )
                    train_loss = float(loss.detach()) * lay.grad_accum
                    acc = _eval_and_log(model, graph, sampler, rt, cfg, device, progress)
                    success = acc >= target
                timings.row(step, dt, wait, samples=cfg.global_batch_size, loss=train_loss)
                if success or stop or step >= max_steps:
                    break
                if k is not None:
                    timings.flush()
                    if ck.due(step):
                        meta = {"epoch": epoch, "next_step_in_epoch": s + 1, "epoch_num": progress}
                        ck.save(step, _state(model, opt, gen, epoch_order), meta)
            first_s = 0
            if success or stop or step >= max_steps:
                rt.log.end("epoch_stop", metadata={"epoch_num": progress})
                break
            rt.log.end("epoch_stop", metadata={"epoch_num": epoch + 1})
            epoch += 1
    finally:
        timings.close()
    return RunOutcome(success, {"epoch_num": progress})


# ---- resumable run checkpoints (harness/train/run_checkpoint.py; `mlperf run --resume`) -----------
# Taken right after an evaluation (nothing else is logged between it and the next step), so the
# log offset is consistent: the resumed run logs neither epoch_start nor anything before the next
# step. Data position: the epoch, the next step within it and the epoch's shuffle generator state
# (the permutation is re-drawn from it); every rank's sampler generator (the global RNGs:
# RunCheckpointer).


def _bare(model):
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model


def _state(model, opt, gen, epoch_order) -> dict:
    return {
        "model": _bare(model).state_dict(),
        "optimizer": opt.state_dict(),
        "sampler_rng": gen.get_state(),
        "order_rng": epoch_order,
    }


def _load(state: dict, model, opt, gen, order_gen) -> None:
    try:
        _bare(model).load_state_dict(state["model"])
    except RuntimeError as e:
        raise HarnessError(f"cannot resume: checkpoint does not fit the model ({str(e)[:200]})", 2) from None
    opt.load_state_dict(state["optimizer"])
    gen.set_state(state["sampler_rng"])
    order_gen.set_state(state["order_rng"])


def _eval_and_log(model, graph, sampler, rt, cfg, device, progress):
    rt.log.start("eval_start", value=progress, metadata={"epoch_num": progress})
    correct, total = evaluate(model, graph, sampler, rt, cfg, device)
    stats = torch.stack([correct.double(), total.double()])
    if rt.world_size > 1:
        dist.all_reduce(stats)
    acc = float(stats[0] / stats[1])
    rt.log.event("eval_accuracy", acc, metadata={"epoch_num": progress})
    rt.log.end("eval_stop", value=progress, metadata={"epoch_num": progress})
    return acc


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
