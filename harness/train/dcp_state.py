"""A model's and its optimizer's run-checkpoint state through torch.distributed.checkpoint (DCP),
sharded: the run checkpointer's `sharded=` writer/reader for the loops built on plain torch modules
(FSDP2, DDP or one process: llama2_70b_lora, flux1).

    run_state(model, optimizer, trainable_only=..., check=...)   harness/train/run_checkpoint.py
      .write(folder)   every rank, collectively: its shards, in parallel
      .read(folder)    every rank, collectively: its shards back into the live objects

What a checkpoint holds: the model's weights (only those with gradients where `trainable_only`:
a frozen base is re-read from its own files) and the optimizer state of each (AdamW's `exp_avg`,
`exp_avg_sq`, `step`), as torch's distributed state dict gives them (`get_state_dict`): keyed by
canonical parameter names, FSDP2's DTensor shards as DTensors. Not the optimizer's param groups (the
loop sets the LR per step, the rest is the config), so every item is a tensor: nothing in the shard
files is unpickled on load (DCP's own `.metadata` is a pickle; the run checkpointer checks its sha256
against the manifest first). Each rank writes its own shards (`__<rank>_0.distcp`); `.metadata`
maps every tensor's global shape to its chunks, so DCP loads a folder at another FSDP degree or
without FSDP (the run checkpointer itself resumes at the run's world size only: its per-rank RNG
files). Without a process group (one process) DCP writes and reads the same format alone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.errors import USAGE, HarnessError


class DcpState:
    def __init__(self, model, optimizer, trainable_only: bool, check: Callable[[dict, object], None] | None):
        self.model, self.optimizer, self.trainable_only, self.check = model, optimizer, trainable_only, check

    def _options(self, load: bool = False):
        from torch.distributed.checkpoint.state_dict import StateDictOptions

        # On load with trainable_only the frozen weights are "missing" on purpose.
        return StateDictOptions(
            ignore_frozen_params=self.trainable_only, strict=not (load and self.trainable_only)
        )

    def _state(self) -> tuple[dict, Any]:
        """The live tensors a checkpoint holds ({"model", "optimizer"}) and the optimizer's param
        groups (not saved). A fresh optimizer is given zero state first (get_state_dict takes one
        step with zero gradients at lr 0; AdamW leaves the weights exactly as they are)."""
        from torch.distributed.checkpoint.state_dict import get_state_dict

        msd, osd = get_state_dict(self.model, self.optimizer, options=self._options())
        if self.check is not None:
            self.check(msd, self.model)
        return {"model": msd, "optimizer": osd["state"]}, osd["param_groups"]

    def write(self, folder: Path) -> None:
        import torch.distributed.checkpoint as dcp

        state, _ = self._state()
        dcp.save(state, checkpoint_id=str(folder))

    def read(self, folder: Path) -> None:
        """Every rank: this rank's shards from `folder`. A folder that does not fit (keys, shapes)
        is one HarnessError line, exit 2, on every rank."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.api import CheckpointException
        from torch.distributed.checkpoint.state_dict import set_state_dict

        state, groups = self._state()
        try:
            dcp.load(state, checkpoint_id=str(folder))
        except CheckpointException as e:  # a BaseException, raised on every rank with every rank's failures
            first = next(iter(e.failures.values()), (e, None))[0]
            line = " ".join(f"{type(first).__name__}: {first}".split())[:300]
            raise HarnessError(f"cannot resume: {folder} does not fit this model ({line})", USAGE) from None
        set_state_dict(
            self.model,
            self.optimizer,
            model_state_dict=state["model"],
            optim_state_dict={"state": state["optimizer"], "param_groups": groups},
            options=self._options(load=True),
        )


def run_state(model, optimizer, *, trainable_only: bool = False, check=None) -> DcpState:
    """The run checkpointer's sharded writer/reader; `check(model_state_dict, model)` raises
    HarnessError where the state to save is not what the benchmark means to save."""
    return DcpState(model, optimizer, trainable_only, check)
