"""LR range test for llama2_70b_lora: `impl.lr_find`, run in every rank for a plan with task "lr_find".

Started by `mlperf lr-find llama2_70b_lora --system NAME`; the sweep loop and its files are
harness/train/lr_sweep.py's (shared with gpt3). The step is training's own: the model train.build
makes (base checkpoint + fresh LoRA, sharded as in a run), AdamW from harness/train/adamw.py,
steps.train_step with the swept LR in place of cfg.lr_at(step), on the run's data order
(BatchOrder with the run's seed). The loss is averaged over the DP ranks each step (one host sync
per step: this is not a timed run).
"""

from __future__ import annotations

from pathlib import Path

import torch

from harness.train import lr_sweep
from harness.train.adamw import adamw
from harness.train.batch_order import BatchOrder
from reference_impls.llama2_70b_lora import data
from reference_impls.llama2_70b_lora import model as M
from reference_impls.llama2_70b_lora.steps import _all_reduce, train_step
from reference_impls.llama2_70b_lora.train import Mesh, build, rank_batches

# The default sweep: the tiny LoRA (pretrained base, AdamW) shows its whole curve, the fall, the
# minimum near 1e-2 and the divergence, in 100 steps: a run under 30 s on 2 cores.
STEPS = 100


def sweep(rt, steps: int, min_lr: float, max_lr: float) -> dict:
    plan, cfg, layout = rt.plan, rt.cfg, rt.plan.layout
    device = torch.device(rt.device)
    mesh = Mesh(rt, cfg.context_parallel_size)
    train_file, _ = data.dataset_files(Path(plan.data_dir), cfg)
    n_train = data.check_columns(train_file)
    model = build(rt, cfg, mesh)
    params = M.trainable_parameters(model)
    opt = adamw(cfg, params)
    ids, labels = data.load_split(train_file, cfg.max_sequence_length)
    labels = data.shift_labels(labels)
    order = BatchOrder(n_train, cfg.global_batch_size, plan.seed + cfg.seed_offset)
    model.train()

    def step(s: int, lr: float) -> float:
        batches = rank_batches(
            ids, labels, order.rank_batch(s, mesh.dp_rank, mesh.dp), layout.micro_batch_size, device
        )
        loss, _norm = train_step(model, batches, params, opt, cfg, lr, layout.grad_accum, mesh.cp)
        return (_all_reduce(loss.detach().clone(), mesh.dp_group) / mesh.dp).item()

    return lr_sweep.sweep(rt, steps, min_lr, max_lr, step)


def lr_find(rt) -> None:
    """The sweep in this rank (impl.lr_find); rank 0 writes the raw curve for `mlperf lr-find`."""
    lr_sweep.write_raw(rt, sweep(rt, *lr_sweep.request(rt, STEPS)))
