"""Llama 2 LoRA run checkpoints: the trainable LoRA weights and their AdamW state through
torch.distributed.checkpoint, sharded (harness/train/dcp_state.py says what a checkpoint holds).
The frozen base is not saved: it is re-read from the prepared safetensors at start."""

from __future__ import annotations

from harness.core.errors import HarnessError
from harness.train import dcp_state


def _lora_only(msd: dict, model) -> None:
    """The LoRA weights exactly: no buffer, nothing frozen (names are canonical: no wrapper prefixes)."""
    trainable = sum(p.requires_grad for p in model.parameters())
    if len(msd) != trainable or not all(".lora_" in k for k in msd):
        raise HarnessError(
            f"the state dict to checkpoint is not the {trainable} LoRA weights: {sorted(msd)[:3]}"
        )


def run_state(model, optimizer) -> dcp_state.DcpState:
    """The run checkpointer's sharded writer/reader (harness/train/run_checkpoint.py)."""
    return dcp_state.run_state(model, optimizer, trainable_only=True, check=_lora_only)
