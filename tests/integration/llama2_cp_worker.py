"""Worker of test_llama2_cp.py: `python -m torch.distributed.run ... llama2_cp_worker.py PLAN OUT`.

Builds the model as train.run does (train.Mesh, train.build: FSDP over every rank, CP from the
plan's layout), trains STEPS steps with train.train_step on the plan's own batches, evaluates once
with train.evaluate, and rank 0 writes {"loss": [...], "grad_norm": [...], "eval": x} to OUT.
Labels: every next token (below). LoRA dropout is set to 0: its masks are drawn per rank for the tokens each holds, so CP 2 and
CP 1 would drop different activations (the training run keeps 0.1; the resume test covers it).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

STEPS = 4


def main(plan_path: str, out: str) -> None:
    import torch

    from benchmarks.llama2_70b_lora.config import Llama2LoraConfig
    from harness.train import runtime
    from harness.train.adamw import adamw
    from harness.train.batch_order import BatchOrder
    from reference_impls.llama2_70b_lora import data, train

    rt = runtime.start(plan_path, Llama2LoraConfig)
    cfg = rt.cfg.model_copy(update={"lora_dropout": 0.0})
    mesh = train.Mesh(rt, rt.plan.layout.cp)
    model = train.build(rt, cfg, mesh)
    if mesh.world == 1:
        _lora_init_as_sharded(model, rt.plan.seed)
    params = train.M.trainable_parameters(model)
    opt = adamw(cfg, params)
    tr_file, ev_file = data.dataset_files(Path(rt.plan.data_dir), cfg)
    tr_ids, tr_labels = data.load_split(tr_file, cfg.max_sequence_length)
    ev_ids, ev_labels = data.load_split(ev_file, cfg.max_sequence_length)
    # Every token is scored (the next token of the whole sequence, shifted before chunking), not the
    # answer only: the tiny answers (positions 86-94) all lie in chunk 3, rank 0's at CP 2, so with
    # the real labels rank 1 scores nothing and a count not summed over CP would go unseen.
    tr_labels, ev_labels = data.shift_labels(tr_ids), data.shift_labels(ev_ids)
    order = BatchOrder(len(tr_ids), cfg.global_batch_size, rt.plan.seed + cfg.seed_offset)
    lay = rt.plan.layout
    losses, norms = [], []
    for step in range(STEPS):
        idx = order.rank_batch(step, mesh.dp_rank, mesh.dp)
        batches = train.rank_batches(tr_ids, tr_labels, idx, lay.micro_batch_size, "cpu")
        loss, norm = train.train_step(
            model, batches, params, opt, cfg, cfg.lr_at(step), lay.grad_accum, mesh.cp
        )
        if mesh.dp_group is not None and mesh.dp > 1:  # as logged at CP 1 x DP 1: the mean over DP
            torch.distributed.all_reduce(loss, group=mesh.dp_group)
            loss /= mesh.dp
        losses.append(loss.item())
        norms.append(float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm))
    value = train.evaluate(model, ev_ids, ev_labels, mesh, cfg, "cpu")
    if rt.is_rank0:
        Path(out).write_text(json.dumps({"loss": losses, "grad_norm": norms, "eval": value}))
    torch.distributed.barrier()
    sys.stdout.flush()
    os._exit(0)  # as harness/train/entry.py run(): no gloo teardown at interpreter exit


def _lora_init_as_sharded(model, seed: int) -> None:
    """One process: the LoRA A draws of model.init_lora_sharded (each whole A from `seed`), not
    peft's own draws, so the 1-rank reference starts from the 2-rank run's weights (train.build
    draws them so only under FSDP; B is zero either way)."""
    import math

    import torch

    torch.manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if hasattr(m, "reset_lora_parameters"):
                for a in m.lora_A.values():
                    full = torch.empty(a.weight.shape, dtype=a.weight.dtype)
                    torch.nn.init.kaiming_uniform_(full, a=math.sqrt(5))
                    a.weight.copy_(full)


if __name__ == "__main__":
    main(*sys.argv[1:])
