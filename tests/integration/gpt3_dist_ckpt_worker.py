"""Worker of test_gpt3_dist_ckpt.py (run under torchrun with 2 ranks; prints one RESULT line).

1. DP=2 with the distributed optimizer and overlapped grad reduce / param gather: 3 steps, an eval
   forward (as the loop does before a checkpoint), then `dist_ckpt.save` into FOLDER.
2. A fresh model and optimizer load it: every master weight shard, Adam moment and step of this
   rank equals the saved optimizer's, and one more step on each gives the same loss and params.
3. Another layout (TP=2, DP=1) loads the same folder: one step from it gives the DP=2
   continuation's loss and eval loss (to fp32 reduction-order tolerance; a missing moment or
   master weight moves them by orders of magnitude more, see the test).
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist

from benchmarks.gpt3.config import Gpt3Config
from harness.core.layout import derive
from reference_impls.megatron_gpt import dist_ckpt, train
from reference_impls.megatron_gpt import model as gm

MBS, SEQ, VOCAB = 4, 16, 64


def config(**kw) -> Gpt3Config:
    return Gpt3Config(
        num_layers=2, hidden_size=32, num_attention_heads=4, ffn_hidden_size=64, max_sequence_length=SEQ,
        vocab_size=VOCAB, global_batch_size=2 * MBS, micro_batch_size=MBS, opt_base_learning_rate=1e-2,
        reference_global_batch_size=2 * MBS, reference_warmup_steps=2, reference_decay_steps=20,
        reference_checkpoint_step=5, precision="fp32", distributed_optimizer=True,
        make_vocab_size_divisible_by=1, **kw,
    )  # fmt: skip


def batch(step: int, part: int) -> dict:
    tok = torch.randint(0, VOCAB, (MBS, SEQ), generator=torch.Generator().manual_seed(100 * step + part))
    return {"tokens": tok, "labels": tok.roll(-1, 1), "loss_mask": torch.ones(MBS, SEQ),
            "position_ids": torch.arange(SEQ).expand(MBS, SEQ)}  # fmt: skip


def start(cfg, seed: int, init: bool = True):
    lay = derive(cfg, 1, dist.get_world_size(), num_layers=cfg.num_layers, supports=type(cfg).SUPPORTS)
    if init:
        train.init_parallel(lay, seed)
    torch.manual_seed(seed)
    m, o, s, t = gm.build(cfg, lay, "cpu")
    return train.Stepper(m, o, s, t, cfg, lay, "cpu"), lay


def step(st, lay, n: int) -> tuple[float, float]:
    """Train step n on this rank's share of the global batch; (train loss, eval loss) after it."""
    rank = train.data_rank(lay)
    mbs = [batch(n, rank * lay.grad_accum + i) for i in range(lay.grad_accum)]
    loss = st.reduce_loss(st.train_step(mbs))
    return loss, st.evaluate([batch(999, rank * lay.grad_accum + i) for i in range(lay.grad_accum)])


def flat_state(optimizer) -> list:
    """This rank's master weight shards and Adam state, in a fixed order."""
    out = []
    for p, (st, rng, *_) in gm._adam_slots(optimizer).items():
        if "exp_avg" in st:
            main = p.detach().reshape(-1)[rng] if rng is not None else p.detach()
            out.append((main.clone(), st["exp_avg"].clone(), st["exp_avg_sq"].clone(), float(st["step"])))
    return out


def main(folder: str) -> None:
    dist.init_process_group("gloo")
    res = {}
    cfg = config(overlap_grad_reduce=True, overlap_param_gather=True)
    a, lay = start(cfg, seed=1)
    assert lay.dp == 2 and type(a.optimizer.chained_optimizers[0]).__name__ == "DistributedOptimizer"
    for n in range(3):
        step(a, lay, n)
    saved = flat_state(a.optimizer)
    res["shards"] = len(saved)
    if dist.get_rank() == 0:  # the run checkpointer hands the writer an empty, existing folder
        for sub in ("run", "moved"):
            os.makedirs(f"{folder}/{sub}")
    dist.barrier()
    dist_ckpt.save(a.model, a.optimizer, f"{folder}/run")
    dist_ckpt.save(a.model, a.optimizer, f"{folder}/moved", sharding="fully_reshardable")

    b, _ = start(cfg, seed=2, init=False)  # other initial weights: everything must come from the checkpoint
    dist_ckpt.load(b.model, b.optimizer, f"{folder}/run")
    gm.set_schedule_step(b.scheduler, a.scheduler.num_steps)
    loaded = flat_state(b.optimizer)
    res["state_equal"] = len(loaded) == len(saved) and all(
        torch.equal(x, y) for s, t in zip(saved, loaded) for x, y in zip(s[:3], t[:3])
    )
    res["steps"] = [sorted({s[3] for s in saved}), sorted({t[3] for t in loaded})]
    res["steps_equal"] = [s[3] for s in saved] == [t[3] for t in loaded] and saved[0][3] == 3.0
    res["continued"] = [step(a, lay, 3), step(b, lay, 3)]
    pa = torch.cat([p.detach().reshape(-1) for m in a.model for p in m.parameters()])
    pb = torch.cat([p.detach().reshape(-1) for m in b.model for p in m.parameters()])
    res["params_equal"] = torch.equal(pa, pb)
    train._teardown()

    c, lay2 = start(config(tensor_model_parallel_size=2), seed=3)  # TP=2, DP=1: another layout
    assert (lay2.tp, lay2.dp, lay2.grad_accum) == (2, 1, 2)
    dist_ckpt.load(c.model, c.optimizer, f"{folder}/moved", sharding="fully_reshardable")
    gm.set_schedule_step(c.scheduler, 3)
    res["other_layout"] = step(c, lay2, 3)
    train._teardown()
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps(res), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":  # required: dist_checkpointing's writers re-import __main__
    main(sys.argv[1])
