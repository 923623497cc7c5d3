"""The training loop: AdamW on the LoRA weights, clip 0.3, cosine LR, eval loss every 384 samples.

    init (untimed): header -> build model, load the base checkpoint, LoRA, shard -> train/eval
                    sample counts from the parquet metadata -> init_stop
    run  (timed):   run_start -> read the dataset -> steps; every ceil(384 / GBS) steps one eval
                    slot, the first floor(0.125 GBS + 2) slots skipped (rules) -> eval_accuracy
                    (answer-token loss) with samples_count -> stop at the target or max_steps.
The only host syncs are at eval slots (the loss for timings.jsonl is read only there).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from benchmarks.llama2_70b_lora.config import Llama2LoraConfig
from harness.core.benchmark import RunOutcome
from harness.core.errors import ConfigError
from harness.train.adamw import adamw
from harness.train.batch_order import BatchOrder
from harness.train.run_checkpoint import RunCheckpointer
from harness.train.runtime import Runtime
from harness.train.timings import Timings
from reference_impls.llama2_70b_lora import checkpoint as C
from reference_impls.llama2_70b_lora import data, dist_ckpt
from reference_impls.llama2_70b_lora import model as M
from reference_impls.llama2_70b_lora.context_parallel import ContextParallel
from reference_impls.llama2_70b_lora.steps import evaluate, token_losses, train_step

__all__ = ["Mesh", "build", "evaluate", "rank_batches", "run", "token_losses", "train_step"]

# What the log header lists after global_batch_size and gradient_accumulation_steps (rt.hyperparameters).
HYPERPARAMETERS = (
    "opt_base_learning_rate",
    "opt_learning_rate_warmup_factor",
    "opt_learning_rate_training_steps",
    "opt_gradient_clip_norm",
    "opt_adamw_weight_decay",
    "lora_rank",
    "lora_alpha",
    "max_sequence_length",
)


class Mesh:
    """The process layout: DP x CP ranks, FSDP over all of them (None groups for one rank).

    CP 1: a 1-D "dp" mesh, as before CP existed. CP > 1: a 2-D ("dp", "cp") mesh (a CP group is
    CP consecutive ranks: within a node) for the batch split and the K/V all-gather, and FSDP on a
    1-D mesh of all DP x CP ranks: every rank holds a shard, and the LoRA gradients are averaged
    over all of them (steps.train_step scales the loss by CP for it)."""

    def __init__(self, rt, cp: int):
        self.world = rt.world_size
        if self.world % cp:  # layout.derive refuses it first; a hand-written plan lands here
            raise ConfigError(f"context_parallel_size={cp} does not divide the world size {self.world}")
        self.dp = self.world // cp
        self.mesh = self.fsdp_mesh = self.dp_group = self.cp = None
        self.dp_rank = rt.rank
        if self.world > 1:
            from torch.distributed.device_mesh import init_device_mesh

            dev = "cuda" if rt.device.startswith("cuda") else "cpu"
            if cp == 1:
                self.mesh = self.fsdp_mesh = init_device_mesh(dev, (self.dp,), mesh_dim_names=("dp",))
                self.dp_group = self.mesh.get_group()
            else:
                self.mesh = init_device_mesh(dev, (self.dp, cp), mesh_dim_names=("dp", "cp"))
                self.fsdp_mesh = init_device_mesh(dev, (self.world,), mesh_dim_names=("dp_cp",))
                self.dp_group, self.dp_rank = self.mesh.get_group("dp"), self.mesh.get_local_rank("dp")
                self.cp = ContextParallel(self.mesh.get_group("cp"), self.mesh.get_local_rank("cp"), cp)


def build(rt, cfg, mesh: Mesh):
    """Base model (checkpoint weights) + LoRA, sharded and on the device."""
    plan = rt.plan
    dtype = torch.bfloat16 if cfg.precision == "bf16" else torch.float32
    model_dir = Path(plan.data_dir) / cfg.model_dir
    C.checkpoint_files(model_dir)
    C.check_checkpoint_config(model_dir, cfg)
    sharded = cfg.fsdp and mesh.world > 1
    device = torch.device(rt.device)
    base = M.build_base(cfg, "meta" if sharded else "cpu")
    base.to(dtype)  # pyrefly: ignore[bad-argument-type]  (transformers types `to` through a decorator that drops self)
    if not sharded:
        C.load_base_weights(base, model_dir)
    if cfg.fp8:
        M.convert_fp8(base)
    torch.manual_seed(plan.seed)
    model = M.apply_lora(base, cfg)
    if cfg.activation_checkpointing:
        M.enable_activation_checkpointing(model)
    if cfg.compile:
        for layer in base.model.layers:
            layer.compile()
    if sharded:
        M.shard_fsdp(model, mesh.fsdp_mesh, dtype)
        model.to_empty(device=device)
        C.load_base_weights(model, model_dir)
        M.init_lora_sharded(model, plan.seed)
    else:
        model.to(device)
    M.reset_rope(model, device)
    if mesh.cp is not None:
        M.set_context_parallel(model, mesh.cp)
    if not sharded:  # frozen base in `dtype`, LoRA weights in fp32 (peft upcasts them already)
        for p in model.parameters():
            if p.requires_grad and p.dtype != torch.float32:
                p.data = p.data.float()
    if rt.is_rank0:  # what the parameters hold, not what the config asked for (stdout.log)
        frozen = {str(p.dtype) for p in model.parameters() if not p.requires_grad}
        lora = {str(p.dtype) for p in model.parameters() if p.requires_grad}
        print(f"llama2: frozen base {'/'.join(sorted(frozen))}, LoRA {'/'.join(sorted(lora))}", flush=True)
    return model


def rank_batches(ids, labels, idx, mbs: int, device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """This DP rank's rows `idx` as micro-batches of whole sequences (a CP rank takes its chunks
    of them in steps.token_losses)."""
    return [
        (
            ids[idx[j : j + mbs]].to(device, non_blocking=True),
            labels[idx[j : j + mbs]].to(device, non_blocking=True),
        )
        for j in range(0, len(idx), mbs)
    ]


def run(rt: Runtime[Llama2LoraConfig]) -> RunOutcome:
    """Train to the target; reached when it was. Logs everything through rt.log."""
    plan, log = rt.plan, rt.log
    cfg = rt.cfg
    layout = plan.layout
    log.header(plan, rt.hyperparameters(*HYPERPARAMETERS))
    device = torch.device(rt.device)
    mesh = Mesh(rt, cfg.context_parallel_size)  # = layout.cp (layout.derive checked it)
    train_file, eval_file = data.dataset_files(Path(plan.data_dir), cfg)
    n_train, n_eval = data.check_columns(train_file), data.check_columns(eval_file)
    model = build(rt, cfg, mesh)
    params = M.trainable_parameters(model)
    opt = adamw(cfg, params)
    target = plan.target["eval_loss"]
    # Resumable checkpoints (`mlperf run --resume`), taken at eval slots after whatever the slot
    # logs (the next block_start is in the log: a resumed run logs nothing before its next step).
    # LoRA weights + AdamW state: torch.distributed.checkpoint, each rank its shards (dist_ckpt.py);
    # the rank files: RNGs (LoRA dropout). The frozen base is re-read from the safetensors, the data
    # position is the step (BatchOrder is a pure function of it), the LR is lr_at(step).
    ck = RunCheckpointer(rt, cfg.checkpoint_interval_steps, sharded=dist_ckpt.run_state(model, opt))
    resumed = ck.resume()
    first_step = resumed["step"] if resumed else 0
    log.event("train_samples", n_train)
    log.event("eval_samples", n_eval)
    log.init_stop()

    log.run_start()
    tr_ids, tr_labels = data.load_split(train_file, cfg.max_sequence_length)
    ev_ids, ev_labels = data.load_split(eval_file, cfg.max_sequence_length)
    tr_labels, ev_labels = data.shift_labels(tr_labels), data.shift_labels(ev_labels)
    if device.type == "cuda":
        tr_ids, tr_labels = tr_ids.pin_memory(), tr_labels.pin_memory()
    order = BatchOrder(n_train, cfg.global_batch_size, plan.seed + cfg.seed_offset)
    mbs, ga = layout.micro_batch_size, layout.grad_accum
    timings = Timings(rt)
    samples, slots, success = first_step * cfg.global_batch_size, first_step // cfg.eval_interval_steps, False
    if not plan.resume_from:  # a resumed run's open block_start is in the log already
        log.start("block_start", metadata={"samples_count": 0})
    model.train()
    try:
        assert cfg.max_steps is not None and cfg.skip_evals is not None  # derived by the config's validator
        for step in range(first_step, cfg.max_steps):
            if rt.should_stop(step):  # agreed by all ranks: none is left waiting in a collective
                break
            t0 = time.perf_counter()
            batches = rank_batches(
                tr_ids, tr_labels, order.rank_batch(step, mesh.dp_rank, mesh.dp), mbs, device
            )
            t_data = time.perf_counter() - t0
            loss_sum, _ = train_step(model, batches, params, opt, cfg, cfg.lr_at(step), ga, mesh.cp)
            samples += cfg.global_batch_size
            dt = time.perf_counter() - t0
            slot = (step + 1) % cfg.eval_interval_steps == 0
            slots += slot
            evaluating = slot and slots > cfg.skip_evals
            loss = loss_sum.item() if evaluating else None  # the only host sync, at eval slots
            timings.row(step + 1, dt, t_data, samples=cfg.global_batch_size, loss=loss)
            if evaluating:
                log.end("block_stop", metadata={"samples_count": samples})
                log.start("eval_start", metadata={"samples_count": samples})
                value = evaluate(model, ev_ids, ev_labels, mesh, cfg, device)
                log.event("eval_accuracy", value, metadata={"samples_count": samples})
                log.end("eval_stop", metadata={"samples_count": samples})
                if value <= target:
                    success = True
                    log.run_stop(True, metadata={"samples_count": samples})
                    break
                log.start("block_start", metadata={"samples_count": samples})
            if slot:
                timings.flush()
                if ck.due(step + 1):
                    ck.save(step + 1, None, {"samples_count": samples})
        if not success:
            log.end("block_stop", metadata={"samples_count": samples})
            log.run_stop(False, metadata={"samples_count": samples})
    finally:
        timings.close()
    return RunOutcome(success)
