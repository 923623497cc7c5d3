"""The base checkpoint: config.json + *.safetensors, read shard by shard.

A rank reads only the part of each tensor it keeps: for a sharded parameter (an FSDP2 DTensor, or
any other placement) the local box (offset, shape) of the global tensor is computed from the
DTensor's mesh and placements, and only that box is sliced out of the file (safetensors'
`get_slice`, which reads just the requested bytes of the memory-mapped file). At 70B size a rank of
an FSDP-8 layout reads ~17 GB, not the whole ~140 GB. A checkpoint with split q/k/v weights is
fused into `qkv_proj` (rows [q; k; v]) by mapping the rank's row range onto the three tensors.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from harness.core.errors import ConfigError

QKV = ("q_proj", "k_proj", "v_proj")


def checkpoint_files(model_dir: Path) -> list[Path]:
    """The safetensors files of a checkpoint dir; ConfigError (one line) when something is missing."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise ConfigError(
            f"base checkpoint directory {model_dir} does not exist: put the Llama-2-70B "
            f"weights there (config.json + *.safetensors, e.g. the MLCommons fused-QKV "
            f"checkpoint; never downloaded by the harness)"
        )
    if not (model_dir / "config.json").exists():
        raise ConfigError(f"base checkpoint {model_dir} has no config.json")
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise ConfigError(
            f"base checkpoint {model_dir} has no *.safetensors files (convert .bin/.nemo "
            f"checkpoints to safetensors first)"
        )
    return files


def check_checkpoint_config(model_dir: Path, cfg) -> None:
    """The checkpoint's config.json must describe the model the config asks for."""
    c = json.loads((Path(model_dir) / "config.json").read_text())
    want = {
        "hidden_size": cfg.hidden_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "intermediate_size": cfg.intermediate_size,
        "vocab_size": cfg.vocab_size,
        "num_key_value_heads": cfg.num_key_value_heads,
    }
    for k, v in want.items():
        if k in c and c[k] != v:
            raise ConfigError(f"base checkpoint {model_dir}/config.json has {k}={c[k]}, the config wants {v}")


class _Reader:
    """Lazy access to boxes of the checkpoint's tensors over all files, fusing split q/k/v."""

    def __init__(self, files: list[Path]):
        from safetensors import safe_open

        self.handles = [safe_open(str(f), framework="pt") for f in files]
        self.where = {k: h for h in self.handles for k in h.keys()}

    def _parts(self, name: str) -> list[str]:
        """The stored tensors whose dim-0 concatenation is `name` (itself, or split q/k/v)."""
        if name in self.where:
            return [name]
        if ".qkv_proj." in name:
            parts = [name.replace(".qkv_proj.", f".{p}.") for p in QKV]
            if all(p in self.where for p in parts):
                return parts
        raise ConfigError(f"base checkpoint has no tensor '{name}' (is it a Llama checkpoint of this size?)")

    def shape(self, name: str) -> tuple[int, ...]:
        shapes = [tuple(self.where[p].get_slice(p).get_shape()) for p in self._parts(name)]
        return (sum(s[0] for s in shapes), *shapes[0][1:])

    def read(self, name: str, box: tuple[slice, ...]) -> torch.Tensor:
        """The tensor's elements in `box` (one slice per dim, steps of 1), and no others."""
        rows, rest = box[0], box[1:]
        pieces, base = [], 0
        for p in self._parts(name):
            sl = self.where[p].get_slice(p)
            n = sl.get_shape()[0]
            lo, hi = max(rows.start, base), min(rows.stop, base + n)
            if lo < hi:
                pieces.append(sl[(slice(lo - base, hi - base), *rest)])
            base += n
        if len(pieces) == 1:
            return pieces[0]
        if pieces:
            return torch.cat(pieces, dim=0)
        return torch.empty(0)  # an empty shard (fewer rows than ranks): nothing to read


def _local_box(p) -> tuple[slice, ...]:
    """The box of the global tensor that this rank's shard of DTensor `p` holds."""
    # The function DCP uses for the same question (each placement's chunking, uneven shards incl.).
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    shape, offset = compute_local_shape_and_global_offset(p.shape, p.device_mesh, p.placements)
    return tuple(slice(o, o + n) for o, n in zip(offset, shape))


def load_base_weights(model: nn.Module, model_dir: Path) -> None:
    """Copy checkpoint tensors into `model`'s (possibly sharded) parameters; a sharded parameter
    reads only its own shard's bytes from the file."""
    from torch.distributed.tensor import DTensor

    reader = _Reader(checkpoint_files(model_dir))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_" in name:  # adapters are initialised, not loaded
                continue
            ck = _ckpt_name(name)
            have = reader.shape(ck)
            if have != tuple(p.shape):
                raise ConfigError(
                    f"base checkpoint tensor {ck} has shape {have}, the model wants {tuple(p.shape)}"
                )
            if isinstance(p, DTensor):
                local = p.to_local()
                if local.numel():
                    local.copy_(reader.read(ck, _local_box(p)).to(p.dtype))
            else:
                p.copy_(reader.read(ck, tuple(slice(0, n) for n in have)).to(p.dtype))


def _ckpt_name(param_name: str) -> str:
    """Parameter name in the (unwrapped) model -> tensor name in the HF checkpoint."""
    n = param_name.replace("base_model.model.", "").replace(".base_layer.", ".")
    return n.replace("_checkpoint_wrapped_module.", "").replace("_orig_mod.", "")


def save_base(model: nn.Module, out_dir: Path) -> list[Path]:
    """Write config.json + model.safetensors (tiny base, the stand-in for the gated checkpoint)."""
    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    lc = model.config.to_dict()
    lc["fused_qkv"] = True
    (out_dir / "config.json").write_text(json.dumps(lc, indent=1, sort_keys=True, default=str))
    sd = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(sd, str(out_dir / "model.safetensors"))
    return [out_dir / "config.json", out_dir / "model.safetensors"]
