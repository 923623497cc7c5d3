"""The Megatron-GPT pretraining loop (every rank; gpt3 and the family's other models): resume from the checkpoint, train, evaluate, stop at target.

    rt = runtime.start(plan)            header, hyperparameters, train/eval_samples      (untimed init)
    build model/optimizer, load ckpt    schedule continues at init_checkpoint_step
    init_stop, run_start                                                                (timed)
    every eval_interval_steps steps:    block_start/stop, eval over the full validation
                                        set, eval_accuracy(log-ppl, epoch_num = tokens)
    log-ppl <= target -> run_stop success (exit 0); train_samples_cap -> aborted (exit 3)
    power mode: after run_stop the same blocks and evals go on until every node's sampler has
    60 readings (rt.more_power_readings); time-to-train is unchanged

No host-device syncs per step of our own: the training loss stays a tensor until an eval point
(megatron's grad clipping reads the grad norm each step, as in the reference). Rank 0 writes the
MLPerf log and `run_dir/timings.jsonl` (one buffered JSON line per step); MoE models also
`run_dir/routing.jsonl` (tokens per expert at each eval point, routing.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from benchmarks.megatron_gpt import MegatronGptConfig
from harness.core.benchmark import RunOutcome
from harness.train.run_checkpoint import RunCheckpointer
from harness.train.runtime import Runtime
from harness.train.timings import Timings
from reference_impls.megatron_gpt import bench, cpu_compat, data, datafiles, dist_ckpt
from reference_impls.megatron_gpt import model as gmodel
from reference_impls.megatron_gpt.routing import RoutingStats

LOSS_KEY = "lm loss"


def init_parallel(layout, seed: int, cfg=None, gloo: bool = True) -> None:
    """Megatron's model-parallel groups and RNG seeds for this rank, as Megatron-LM's initialize does.

    With `cfg.cuda_graphs` the RNG tracker must be one a CUDA graph can capture (megatron's
    CudaGraphManager asserts it at model build): Transformer Engine's where TE is installed
    (`te_rng_tracker`; Megatron-LM turns it on for graphs with the TE spec), else megatron's own
    tracker in its graph-safe mode (`use_cudagraphable_rng`, Megatron-LM's `enable_cuda_graph`).
    TransformerConfig's `use_te_rng_tracker` field is read by nothing in megatron-core (0.16.1, 0.19.2): the
    tracker is chosen here or not at all. `gloo=False`: no gloo groups (the meta-device build's fake
    world cannot make them; training needs them only to save the distributed optimizer's state).
    The reset makes a second call in one process (the build of several configs) choose afresh.
    """
    cpu_compat.enable()  # first: on CPU it imports megatron without its compile decorators
    from megatron.core import parallel_state as ps
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    ps.initialize_model_parallel(
        tensor_model_parallel_size=layout.tp,
        pipeline_model_parallel_size=layout.pp,
        virtual_pipeline_model_parallel_size=layout.vp if layout.vp > 1 else None,
        context_parallel_size=layout.cp,
        create_gloo_process_groups=gloo,
        **(gmodel.expert_parallel(cfg, layout) if cfg is not None else {}),
    )
    graphs = bool(cfg is not None and cfg.cuda_graphs)
    torch.manual_seed(seed)
    model_parallel_cuda_manual_seed(
        seed, te_rng_tracker=graphs, use_cudagraphable_rng=graphs, force_reset_rng=True
    )


class Stepper:
    """One optimizer step (GA microbatches through megatron's schedule) and one full evaluation."""

    def __init__(self, model, optimizer, scheduler, tcfg, cfg, layout, device: str):
        from megatron.core import parallel_state as ps
        from megatron.core.distributed.finalize_model_grads import finalize_model_grads
        from megatron.core.pipeline_parallel.schedules import get_forward_backward_func

        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.cfg, self.layout, self.device = cfg, layout, device
        self.fb = get_forward_backward_func()
        single = len(model) == 1
        tcfg.no_sync_func = model[0].no_sync if single else [m.no_sync for m in model]
        tcfg.finalize_model_grads_func = finalize_model_grads
        tcfg.grad_scale_func = optimizer.scale_loss
        if not single and model[0].ddp_config.overlap_grad_reduce:
            tcfg.grad_sync_func = [m.start_grad_sync for m in model]
        if model[0].ddp_config.overlap_param_gather:
            tcfg.param_sync_func = (
                [m.start_param_sync for m in model] if not single else model[0].start_param_sync
            )
        self.dp_rank = ps.get_data_parallel_rank()
        # Ranks whose loss sums count once in a world all-reduce: last PP stage, TP/CP rank 0.
        self.reports_loss = (
            ps.is_pipeline_last_stage()
            and ps.get_tensor_model_parallel_rank() == 0
            and ps.get_context_parallel_rank() == 0
        )

    def _forward_step(self, data_iterator, model):
        b = next(data_iterator)
        if self.device != "cpu":
            b = {k: v.to(self.device, non_blocking=True) for k, v in b.items()}
        out = model(b["tokens"], b["position_ids"], None, labels=b["labels"])
        mask = b["loss_mask"]

        def loss_func(output):
            losses = output.float() * mask
            total, n = losses.sum(), mask.sum()
            # A new tensor for the report: the schedule divides the loss by GA in place.
            return total / n.clamp(min=1), {LOSS_KEY: torch.stack([total.detach(), n.detach()])}

        return out, loss_func

    def _iterator(self, microbatches: list):
        it = iter(microbatches)
        return it if len(self.model) == 1 else [iter(microbatches) for _ in self.model]

    def _schedule(self, microbatches: list, forward_only: bool):
        """megatron's pipeline schedule over the microbatches (the chunks' iterators, one each)."""
        return self.fb(
            forward_step_func=self._forward_step,
            data_iterator=self._iterator(microbatches),
            model=self.model if len(self.model) > 1 else self.model[0],
            num_microbatches=len(microbatches),
            seq_length=self.cfg.max_sequence_length,
            micro_batch_size=self.layout.micro_batch_size,
            forward_only=forward_only,
        )

    def train_step(self, microbatches: list):
        """Forward/backward over the GA microbatches, clip, Adam, schedule; returns the loss reports."""
        for m in self.model:
            m.zero_grad_buffer()
        self.optimizer.zero_grad()
        reports = self._schedule(microbatches, forward_only=False)
        self.optimizer.step()
        self.scheduler.step(increment=1)
        return reports

    @torch.no_grad()
    def evaluate(self, microbatches: list) -> float:
        """Mean validation cross-entropy (nats/token) over every rank's share of the validation set."""
        for m in self.model:
            m.eval()
        reports = self._schedule(microbatches, forward_only=True)
        for m in self.model:
            m.train()
        return self.reduce_loss(reports)

    def reduce_loss(self, reports) -> float:
        """Sum (loss, tokens) over microbatches and ranks; a collective: call on every rank."""
        import torch.distributed as dist

        sums = torch.zeros(2, dtype=torch.float64, device=self.device)
        if self.reports_loss:
            for r in reports:
                sums += r[LOSS_KEY].to(sums.dtype)
        if dist.is_initialized() and dist.get_world_size() > 1:
            dist.all_reduce(sums)
        total, n = sums.tolist()
        return total / max(n, 1.0)


def eval_microbatches(valid, dp_rank: int, dp: int, mbs: int) -> list:
    """This DP rank's share of the whole validation set as microbatches; the last one is padded
    with masked copies so every microbatch has MBS sequences (pipeline shapes are fixed)."""
    idx = list(range(dp_rank, len(valid), dp))
    per_rank = -(-len(valid) // dp)
    pad = (-per_rank) % mbs + (per_rank - len(idx))
    items = [valid[i] for i in idx]
    for _ in range(pad):
        it = dict(valid[0])
        it["loss_mask"] = torch.zeros_like(it["loss_mask"])
        items.append(it)
    keys = ("tokens", "labels", "loss_mask", "position_ids")
    return [
        {k: torch.stack([it[k] for it in items[i : i + mbs]]) for k in keys}
        for i in range(0, len(items), mbs)
    ]


def train_microbatches(train, step: int, layout) -> list:
    """The GA microbatches of this DP rank for run step `step` (samples [step*GBS, (step+1)*GBS))."""
    per_rank = layout.micro_batch_size * layout.grad_accum
    start = step * layout.global_batch_size + data_rank(layout) * per_rank
    return list(data.batches(train, start, layout.grad_accum, layout.micro_batch_size))


def data_rank(layout) -> int:
    from megatron.core import parallel_state as ps

    return ps.get_data_parallel_rank() if layout.dp > 1 else 0


def run(rt: Runtime[MegatronGptConfig]) -> RunOutcome:
    """Train one run; reached when the target was. Raises on errors (the entry logs run_stop)."""
    plan, log = rt.plan, rt.log
    cfg, layout = rt.cfg, plan.layout
    target = plan.target["log_perplexity"]
    log.header(plan, rt.hyperparameters() | cfg.logged())
    log.event("train_samples", cfg.train_samples_cap)
    data_dir = Path(plan.data_dir)
    if plan.size == "tiny" and not bench.manifest(plan).is_prepared(plan):
        from harness.core.errors import ConfigError

        raise ConfigError(
            f"{data_dir}: tiny {plan.benchmark} data is not prepared; "
            f"run `mlperf prepare {plan.benchmark} --size tiny`"
        )
    model, optimizer, scheduler, tcfg = start_model(rt)
    routing = RoutingStats(model, plan.run_dir if rt.is_rank0 else None, append=bool(plan.resume_from))
    gmodel.set_schedule_step(scheduler, cfg.start_step())
    train, valid = datasets(rt)
    log.event("eval_samples", cfg.eval_samples)
    stepper = Stepper(model, optimizer, scheduler, tcfg, cfg, layout, rt.device)
    ck = RunCheckpointer(rt, cfg.checkpoint_interval_steps, sharded=dist_ckpt.run_state(model, optimizer))
    resumed = ck.resume(lambda state, meta: gmodel.set_schedule_step(scheduler, meta["schedule_num_steps"]))
    timings = Timings(rt)
    log.init_stop()
    log.run_start()
    # Token reads start the clock (the rules time everything that touches the dataset; building
    # the index above reads document lengths only, which is metadata).
    val_batches = eval_microbatches(valid, data_rank(layout), layout.dp, layout.micro_batch_size)

    seq, gbs = cfg.max_sequence_length, cfg.global_batch_size
    cap_steps = cfg.train_samples_cap // gbs  # the sequences GPTDataset drew
    max_steps = min(cfg.stop_step() or cap_steps, cap_steps)
    # Progress as the benchmark's rules count it: gpt3 in tokens (`epoch_num`, blocks with
    # first_epoch_num/epoch_count), llama31_8b in sequences (`samples_count`).
    tokens = bench.of(plan).rules.progress_key == "epoch_num"

    def at(step: int) -> dict:
        return {"epoch_num": step * gbs * seq} if tokens else {"samples_count": step * gbs}

    def block(first: int, steps: int) -> dict:
        if tokens:
            return {"first_epoch_num": first * gbs * seq, "epoch_count": steps * gbs * seq}
        return {"samples_count": first * gbs}

    reached = False
    step = resumed["step"] if resumed else 0
    stopping = False  # agreed by all ranks (rt.should_stop), so no rank is left in a collective
    try:
        while step < max_steps and not stopping:
            first = step
            steps = min(cfg.next_eval_step(step) - step, max_steps - step)
            log.start("block_start", metadata=block(first, steps))
            reports: list = []  # steps >= 1: the last step's reports
            for _ in range(steps):
                t0 = time.perf_counter()
                mbs = train_microbatches(train, step, layout)
                t1 = time.perf_counter()
                reports = stepper.train_step(mbs)
                step += 1
                timings.row(step, time.perf_counter() - t0, t1 - t0, samples=gbs)
                if rt.should_stop(step):
                    stopping = True
                    break
            log.end("block_stop", metadata=block(first, steps) if tokens else at(step))
            if stopping:
                break
            log.start("eval_start", metadata=at(step))
            train_loss = stepper.reduce_loss(reports)
            with routing.paused():  # routing.jsonl counts training tokens only
                ppl = stepper.evaluate(val_batches)
            log.event("eval_accuracy", ppl, metadata=at(step))
            log.end("eval_stop", metadata=at(step))
            timings.set_loss(train_loss)
            timings.flush()
            routing.write(step)
            if rt.is_rank0:
                print(
                    f"step {step} tokens {step * gbs * seq} train_loss {train_loss:.4f} eval_log_ppl {ppl:.4f} "
                    f"lr {optimizer.param_groups[0]['lr']:.3g}",
                    flush=True,
                )
            if ppl <= target and not reached:
                reached = True
                log.run_stop(True, None if tokens else at(step))  # time-to-train ends here, loop or not
            if reached and not rt.more_power_readings():
                break  # power mode trains on, same blocks and evals, until 60 readings exist
            if ck.due(step) and not reached:  # nothing to resume after run_stop
                ck.save(
                    step, meta={"consumed_samples": step * gbs, "schedule_num_steps": scheduler.num_steps}
                )
    finally:
        timings.close()
        _teardown()
    return RunOutcome(reached)


def start_model(rt):
    """Model-parallel groups, then the model, optimizer and LR schedule loaded from the starting
    checkpoint (tiny: the prepared state; full: the reference's checkpoint); also the LR sweep's."""
    plan, data_dir = rt.plan, Path(rt.plan.data_dir)
    init_parallel(plan.layout, plan.seed, rt.cfg)
    model, optimizer, scheduler, tcfg = gmodel.build(rt.cfg, plan.layout, rt.device, plan.seed)
    if not rt.cfg.FROM_CHECKPOINT:
        pass  # pretraining from the init (megatron's init_method_std, the seed's RNG)
    elif plan.size == "tiny":  # weights only where prepare saved no Adam state
        state = torch.load(data_dir / datafiles.CHECKPOINT, map_location="cpu", weights_only=True)
        gmodel.load_tiny_state(model, optimizer, state)
    else:
        start = data_dir / datafiles.full_data(type(rt.cfg)).start_dir
        if rt.cfg.START_WEIGHTS_ONLY:  # the reference's load_optim=False
            dist_ckpt.load_weights(model, optimizer, start)
        else:
            dist_ckpt.load(model, optimizer, start, sharding=dist_ckpt.START_SHARDING)
    return model, optimizer, scheduler, tcfg


def datasets(rt):
    """(train, valid) of the plan's data. megatron's index cache: rank 0 builds it, the others read
    it (a barrier in the builder); tiny: per run, full: beside the data, shared by every run
    (building it takes minutes)."""
    plan, cfg, data_dir = rt.plan, rt.cfg, Path(rt.plan.data_dir)
    cache = Path(plan.run_dir) / "index_cache" if plan.size == "tiny" else data_dir / "index_cache"
    return data.build_datasets(data_dir, cfg, plan.size, plan.seed + cfg.seed_offset, cache_dir=cache)


# ---- resumable run checkpoints (`mlperf run --resume`) --------------------------------------------
# Taken at eval boundaries only, so what the log holds after a checkpoint is at most the next
# block's start: the resumed run re-logs it. The model and optimizer (incl. the distributed
# optimizer's master weights and moments) go through megatron dist_checkpointing, every rank
# writing its shards into the step folder (dist_ckpt.run_state); RNGs, the log offset and the
# manifest are the run checkpointer's (harness/train/run_checkpoint.py); the LR schedule's
# position is in the meta, and the data position is the step (batches are a pure function of
# it, see train_microbatches).


def _teardown():
    from megatron.core import parallel_state as ps

    if ps.model_parallel_is_initialized():
        ps.destroy_model_parallel()
