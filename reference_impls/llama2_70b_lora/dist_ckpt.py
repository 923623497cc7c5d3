"""Llama 2 LoRA run checkpoints through torch.distributed.checkpoint (DCP), sharded.

    run_state(model, optimizer)  the run checkpointer's sharded writer/reader
                                 (harness/train/run_checkpoint.py `sharded=`)
      .write(folder)             every rank, collectively: its shards, in parallel
      .read(folder)              every rank, collectively: its shards back into the live objects

What a checkpoint holds: the trainable LoRA weights and the AdamW state of each of them
(`exp_avg`, `exp_avg_sq`, `step`), as torch's distributed state dict gives them
(`get_state_dict`, `ignore_frozen_params=True`): keyed by canonical parameter names, FSDP2's
DTensor shards as DTensors. The frozen base is not saved (it is re-read from the prepared
safetensors at start), nor the optimizer's param groups (lr is `lr_at(step)`, the rest is the
config), so every item is a tensor: nothing in the shard files is unpickled on load (DCP's own
`.metadata` file is a pickle; the run checkpointer checks its sha256 against the manifest first).

Each rank writes its own shards (`__<rank>_0.distcp`); a tensor every rank holds whole (AdamW's
`step`) is written by one of them. The `.metadata` file maps every tensor's global shape to the
chunks in the files, so DCP can load the folder at another FSDP degree or without FSDP (checked:
a 2-rank checkpoint loads into one process bit for bit); the run checkpointer itself resumes at
the run's world size only (its per-rank RNG files). Without a process group (one process) DCP
writes and reads the same format alone.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import USAGE, HarnessError


def _options(load: bool = False):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    # On load the model state dict has the LoRA weights only: the frozen base is "missing" on purpose.
    return StateDictOptions(ignore_frozen_params=True, strict=not load)


def _state(model, optimizer) -> tuple[dict, list]:
    """The live tensors a checkpoint holds ({"model", "optimizer"}) and the optimizer's param groups
    (parameter names, not saved). A fresh optimizer is given zero state first (get_state_dict
    takes one step with zero gradients at lr 0; AdamW leaves the weights exactly as they are)."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    msd, osd = get_state_dict(model, optimizer, options=_options())
    # The LoRA weights exactly: no buffer, nothing frozen (names are canonical: no wrapper prefixes).
    trainable = sum(p.requires_grad for p in model.parameters())
    if len(msd) != trainable or not all(".lora_" in k for k in msd):
        raise HarnessError(
            f"the state dict to checkpoint is not the {trainable} LoRA weights: {sorted(msd)[:3]}"
        )
    return {"model": msd, "optimizer": osd["state"]}, osd["param_groups"]


def save(model, optimizer, folder: Path) -> None:
    import torch.distributed.checkpoint as dcp

    state, _ = _state(model, optimizer)
    dcp.save(state, checkpoint_id=str(folder))


def load(model, optimizer, folder: Path) -> None:
    """Every rank: this rank's shards of the LoRA weights and AdamW state from `folder`. A folder
    that does not fit (keys, shapes) is one HarnessError line, exit 2, on every rank."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict import set_state_dict

    state, groups = _state(model, optimizer)
    try:
        dcp.load(state, checkpoint_id=str(folder))
    except CheckpointException as e:  # a BaseException, raised on every rank with every rank's failures
        first = next(iter(e.failures.values()), (e, None))[0]
        line = " ".join(f"{type(first).__name__}: {first}".split())[:300]
        raise HarnessError(f"cannot resume: {folder} does not fit this model ({line})", USAGE) from None
    set_state_dict(
        model,
        optimizer,
        model_state_dict=state["model"],
        optim_state_dict={"state": state["optimizer"], "param_groups": groups},
        options=_options(load=True),
    )


def run_state(model, optimizer):
    """The run checkpointer's sharded writer/reader (harness/train/run_checkpoint.py)."""
    from harness.train.run_checkpoint import ModelState

    return ModelState(save, load, model, optimizer)
