"""Worker of test_gpt3_adam_step.py (one process, gloo world 1; prints one RESULT line).

For each Adam megatron-core can pick (torch's AdamW on this CPU host; `FusedAdamLike`, a stand-in
for Transformer Engine's FusedAdam, which is not installable here) and for the plain and the
distributed optimizer: 3 steps, then the tiny checkpoint (model.tiny_state) and megatron
dist_checkpointing (dist_ckpt.save) are written; fresh models with other initial weights load
each, and report where their step landed and whether their next step equals the saved run's 4th.
The fused case runs megatron's own TE branches: `get_megatron_optimizer` builds FusedAdamLike
with TE's arguments, and the distributed optimizer takes its USING_TE_OPTIMIZER paths.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager

import torch
import torch.distributed as dist

from benchmarks.gpt3.config import Gpt3Config
from harness.core.layout import Layout
from harness.train.runtime import init_one_process_group
from reference_impls.megatron_gpt import dist_ckpt, train
from reference_impls.megatron_gpt import model as gm

MBS, SEQ, VOCAB = 4, 16, 64


class FusedAdamLike(torch.optim.Optimizer):
    """TE's FusedAdam (transformer_engine/pytorch/optimizers/fused_adam.py) as far as where its
    state lives: the step is `group["step"]`, an int it creates or increments once per step of
    a group with params; `state[p]` holds only exp_avg and exp_avg_sq, created on the first step;
    `state_dict()` / `load_state_dict()` raise KeyError on any other per-parameter key, as TE's
    `name_to_dtype_map[state_name]` lookups do. The update is TE's non-capturable Adam(W):
    bias-corrected moments from the group's step."""

    NAMES = ("exp_avg", "exp_avg_sq", "master_param")

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0.0,
        *,
        adam_w_mode=True,
        capturable=False,
    ):
        # megatron-core 0.19 passes `capturable` (its optimizer_cuda_graph, False here) to every Adam
        assert not capturable, "the stand-in is TE's non-capturable FusedAdam"
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
        self.adam_w_mode = adam_w_mode

    def _only_te_keys(self, states) -> None:
        for st in states:
            for k in st:
                if k not in self.NAMES:
                    raise KeyError(k)

    def state_dict(self):
        self._only_te_keys(self.state.values())
        return super().state_dict()

    def load_state_dict(self, state_dict):
        self._only_te_keys(state_dict["state"].values())
        super().load_state_dict(state_dict)

    @torch.no_grad()
    def step(self, closure=None):
        for g in self.param_groups:
            if not g["params"]:
                continue
            g["step"] = g.get("step", 0) + 1
            t, (b1, b2) = g["step"], g["betas"]
            for p in g["params"]:
                st = self.state[p]
                if not st:
                    st.update(exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
                if p.grad is None:
                    continue
                grad = p.grad
                if self.adam_w_mode:
                    p.mul_(1 - g["lr"] * g["weight_decay"])
                else:
                    grad = grad.add(p, alpha=g["weight_decay"])
                st["exp_avg"].mul_(b1).add_(grad, alpha=1 - b1)
                st["exp_avg_sq"].mul_(b2).addcmul_(grad, grad, value=1 - b2)
                denom = (st["exp_avg_sq"] / (1 - b2**t)).sqrt().add_(g["eps"])
                p.addcdiv_(st["exp_avg"], denom, value=-g["lr"] / (1 - b1**t))


@contextmanager
def megatron_adam(kind: str):
    """`get_megatron_optimizer` and the distributed optimizer as they are with TE installed."""
    import megatron.core.optimizer as mo
    import megatron.core.optimizer.distrib_optimizer as do

    saved = (mo.Adam, mo.USING_PYTORCH_OPTIMIZER, do.Adam, do.HAVE_APEX_OR_TE, do.USING_TE_OPTIMIZER)
    if kind == "fused":
        mo.Adam, mo.USING_PYTORCH_OPTIMIZER = FusedAdamLike, False
        do.Adam, do.HAVE_APEX_OR_TE, do.USING_TE_OPTIMIZER = FusedAdamLike, True, True
    try:
        yield
    finally:
        mo.Adam, mo.USING_PYTORCH_OPTIMIZER, do.Adam, do.HAVE_APEX_OR_TE, do.USING_TE_OPTIMIZER = saved


def config(distributed: bool) -> Gpt3Config:
    return Gpt3Config(
        num_layers=2, hidden_size=32, num_attention_heads=4, ffn_hidden_size=64, max_sequence_length=SEQ,
        vocab_size=VOCAB, global_batch_size=MBS, micro_batch_size=MBS, opt_base_learning_rate=1e-2,
        reference_global_batch_size=MBS, reference_warmup_steps=2, reference_decay_steps=20,
        reference_checkpoint_step=5, precision="fp32", distributed_optimizer=distributed,
        make_vocab_size_divisible_by=1,
    )  # fmt: skip


LAYOUT = Layout(
    nodes=1, procs_per_node=1, world_size=1, tp=1, pp=1, vp=1, cp=1, dp=1,
    micro_batch_size=MBS, global_batch_size=MBS, grad_accum=1,
)  # fmt: skip


def batch(step: int) -> dict:
    tok = torch.randint(0, VOCAB, (MBS, SEQ), generator=torch.Generator().manual_seed(step))
    return {"tokens": tok, "labels": tok.roll(-1, 1), "loss_mask": torch.ones(MBS, SEQ),
            "position_ids": torch.arange(SEQ).expand(MBS, SEQ)}  # fmt: skip


def start(cfg, seed: int):
    torch.manual_seed(seed)
    m, o, s, t = gm.build(cfg, LAYOUT, "cpu")
    return train.Stepper(m, o, s, t, cfg, LAYOUT, "cpu")


def inners(optimizer):
    return [o.optimizer for o in getattr(optimizer, "chained_optimizers", [optimizer])]


def where(optimizer) -> dict:
    """Where this optimizer's step is: the group steps (groups with params) and the param steps."""
    groups, params, ids, n_states, error = set(), set(), set(), 0, None
    for inner in inners(optimizer):
        try:
            inner.state_dict()  # FusedAdamLike: fails on a per-parameter key TE's would fail on
        except KeyError as e:
            error = f"state_dict(): KeyError {e}"
        groups |= {g["step"] for g in inner.param_groups if g["params"] and "step" in g}
        for st in inner.state.values():
            if "step" in st:
                params.add(float(st["step"]))
                ids.add(id(st["step"]))
        n_states += sum(1 for st in inner.state.values() if "exp_avg" in st)
    own = len(ids) == n_states
    return {
        "group_steps": sorted(groups),
        "param_steps": sorted(params),
        "own_step_tensor": own,
        "error": error,
    }


def next_step(st, n: int) -> tuple[float, torch.Tensor]:
    """Step n: (its train loss, the parameters after it)."""
    loss = st.reduce_loss(st.train_step([batch(n)]))
    return loss, torch.cat([p.detach().reshape(-1) for m in st.model for p in m.parameters()])


def case(kind: str, distributed: bool, folder: str) -> dict:
    cfg = config(distributed)
    out = {}
    with megatron_adam(kind):
        a = start(cfg, seed=1)
        out["inner"] = type(inners(a.optimizer)[0]).__name__
        for n in range(3):
            a.train_step([batch(n)])
        out["saved"] = where(a.optimizer)
        tiny = gm.tiny_state(a.model, a.optimizer, 3, 3 * MBS)
        out["tiny_steps"] = sorted({v["step"] for v in tiny["adam"].values()})
        os.makedirs(folder)
        dist_ckpt.save(a.model, a.optimizer, folder)
        want = next_step(a, 3)
        for name, load in (
            ("tiny", lambda st: gm.load_tiny_state(st.model, st.optimizer, tiny)),
            ("dist_ckpt", lambda st: dist_ckpt.load(st.model, st.optimizer, folder)),
        ):
            b = start(cfg, seed=2)  # other initial weights: everything must come from the checkpoint
            try:
                load(b)
            except Exception as e:  # noqa: BLE001 - reported per case, so the other cases still run
                out[name] = {"error": f"load: {type(e).__name__}: {e}"}
                continue
            gm.set_schedule_step(b.scheduler, 3)
            loaded = where(b.optimizer)
            loss, params = next_step(b, 3)
            out[name] = {**loaded, "next_step_equal": loss == want[0] and torch.equal(params, want[1])}
    return out


def main(folder: str) -> None:
    init_one_process_group("gloo")
    train.init_parallel(LAYOUT, 1)
    res = {
        f"{kind}/{'distributed' if d else 'plain'}": case(kind, d, f"{folder}/{kind}-{d}")
        for kind in ("torch", "fused")
        for d in (False, True)
    }
    train._teardown()
    print("RESULT " + json.dumps(res), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":  # dist_checkpointing's writers re-import __main__
    main(sys.argv[1])
