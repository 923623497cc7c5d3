"""GPT-3 at full size without the memory: every pipeline stage's rank of a layout, on `meta`.

`count(cfg, layout)` runs the training's own `model.build(cfg, layout, "cuda")` (the GPU path: bf16
parameters, megatron DDP with fp32 gradient buffers, Adam, the distributed optimizer when the config
turns it on) once per pipeline stage, as TP rank 0 / DP rank 0 of a fake world of
`layout.world_size` ranks (harness/train/meta.py), with every tensor on the meta device. It returns
the parameter total and, per stage, the bytes that rank holds: weights (the DDP parameter buffers),
gradients (the DDP gradient buffers), optimizer (fp32 master copies of bf16 parameters + Adam
moments, this rank's shard under the distributed optimizer).

What a CPU cannot build, left out because none changes a parameter's shape:
  - Transformer Engine (`fp8`, `tp_comm_overlap`, `cuda_graphs`, its fused LayerNorm+linear spec):
    not installed on CPU; the local spec holds the same tensors (LayerNorm and linear apart), all
    bf16 as TE's are (megatron's Float16Module casts the torch LayerNorms and position embedding).
  - `sequence_parallel`: the local spec's torch LayerNorm refuses it; it splits activations only.
  - gloo process groups: a fake world cannot rendezvous gloo; megatron needs them only to gather the
    distributed optimizer's state on the CPU when it saves a checkpoint.
The vocabulary is padded as the training pads it (`model.padded_vocab`: a multiple of
make_vocab_size_divisible_by x TP, Megatron-LM's rule; 50257 -> 50688 at TP 4).
"""

from __future__ import annotations

import functools
from contextlib import contextmanager

import torch
from torch.overrides import TorchFunctionMode

from harness.train import meta
from reference_impls.gpt3 import cpu_compat
from reference_impls.gpt3 import model as gmodel

CPU_OFF = {"fp8": False, "tp_comm_overlap": False, "cuda_graphs": False, "sequence_parallel": False}

_CUDA_TYPE = {
    torch.bfloat16: "torch.cuda.BFloat16Tensor",
    torch.float16: "torch.cuda.HalfTensor",
    torch.float32: "torch.cuda.FloatTensor",
}


def _is_cuda(d) -> bool:
    return (isinstance(d, torch.device) and d.type == "cuda") or (isinstance(d, str) and d.startswith("cuda"))


class _CudaToMeta(TorchFunctionMode):
    """`device="cuda"` / `.to("cuda")` / `.cuda()` land on meta; `Tensor.type()` answers the CUDA
    type name megatron's optimizers check for. Explicit CPU tensors (collective bookkeeping) stay."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.type and len(args) == 1 and not kwargs:
            return _CUDA_TYPE.get(args[0].dtype, "torch.cuda.Tensor")
        if _is_cuda(kwargs.get("device")):
            kwargs = dict(kwargs, device="meta")
        if func is torch.Tensor.to:
            args = tuple("meta" if _is_cuda(a) else a for a in args)
        return func(*args, **kwargs)


@contextmanager
def _on_meta():
    import megatron.core.optimizer as mopt

    cpu_compat.enable()  # first: its CUDA->CPU mode must sit below ours (ours runs first)
    current, build_opt = torch.cuda.current_device, mopt.get_megatron_optimizer
    torch.cuda.current_device = lambda: torch.device("meta")  # DDP/optimizer buffers
    mopt.get_megatron_optimizer = functools.partial(build_opt, use_gloo_process_groups=False)
    try:
        with torch.device("meta"), _CudaToMeta():
            yield
    finally:
        torch.cuda.current_device, mopt.get_megatron_optimizer = current, build_opt


def shape_config(cfg, layout):
    """The config as the meta build uses it (module docstring: what is off and why)."""
    return cfg.model_copy(update=CPU_OFF)


def build_rank(cfg, layout, rank: int):
    """`model.build` as rank `rank` of the layout, on meta: (stage, model chunks, optimizer)."""
    from megatron.core import parallel_state as ps
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    ps.initialize_model_parallel(  # as train.init_parallel, without the gloo groups
        tensor_model_parallel_size=layout.tp,
        pipeline_model_parallel_size=layout.pp,
        virtual_pipeline_model_parallel_size=layout.vp if layout.vp > 1 else None,
        context_parallel_size=layout.cp,
        create_gloo_process_groups=False,
    )
    try:
        with _on_meta():
            model_parallel_cuda_manual_seed(0)  # the RNG tracker megatron's GPU init draws from
            model, optimizer, _, _ = gmodel.build(cfg, layout, "cuda")
        return ps.get_pipeline_model_parallel_rank(), model, optimizer
    finally:
        ps.destroy_model_parallel()


def _optimizer_bytes(optimizer) -> int:
    """fp32 master copies of half-precision parameters + Adam moments, on this rank."""
    total = 0
    for o in getattr(optimizer, "chained_optimizers", [optimizer]):
        masters = getattr(o, "shard_fp32_from_float16_groups", None) or getattr(
            o, "fp32_from_float16_groups", []
        )
        total += meta.nbytes(p for group in masters for p in group)
        o.init_state_fn(o.optimizer, o.config)  # Adam allocates its moments lazily; now, on meta
        total += meta.state_bytes(o.optimizer)
    return total


def _full_size(chunk, tp: int) -> int:
    """Parameters of this chunk in the unsharded model: TP-split tensors count TP times,
    replicated ones once, the last stage's copy of the tied word embedding not at all."""
    n = 0
    for name, p in chunk.named_parameters():
        if (
            name == "output_layer.weight"
            and chunk.share_embeddings_and_output_weights
            and not chunk.pre_process
        ):
            continue
        n += p.numel() * (tp if getattr(p, "tensor_model_parallel", False) else 1)
    return n


def stage_parts(model, optimizer) -> dict:
    buffers = [b for m in model for b in (*m.buffers, *m.expert_parallel_buffers)]
    weights = sum(
        meta.nbytes([b.param_data]) if b.param_data is not None else meta.nbytes(b.params) for b in buffers
    )
    return meta.rank_parts(
        parameters=sum(p.numel() for m in model for p in m.parameters()),
        weights=weights,
        gradients=meta.nbytes(b.grad_data for b in buffers),
        optimizer=_optimizer_bytes(optimizer),
        dtypes=sorted({str(p.dtype) for m in model for p in m.parameters()}),
    )


def count(cfg, layout) -> dict:
    """Parameter total and per-stage holdings of the busiest (TP 0, DP 0) rank of each stage."""
    scfg = shape_config(cfg, layout)
    per_stage = layout.world_size // layout.pp
    stages, total = {}, 0
    for stage in range(layout.pp):
        with meta.fake_world(layout.world_size, rank=stage * per_stage):
            got, model, optimizer = build_rank(scfg, layout, stage * per_stage)
            if got != stage:
                raise RuntimeError(f"rank {stage * per_stage} is pipeline stage {got}, expected {stage}")
            stages[stage] = stage_parts(model, optimizer)
            total += sum(_full_size(gmodel.unwrap(m), layout.tp) for m in model)
    busiest = max(
        stages, key=lambda s: stages[s]["weights"] + stages[s]["gradients"] + stages[s]["optimizer"]
    )
    return {
        "parameters_total": total,
        "parameters_trainable": total,
        "rank": dict(stages[busiest], stage=busiest),
        "stages": stages,
        "vocab_rows": gmodel.padded_vocab(scfg, layout.tp),  # embedding/output rows as built
        "off": sorted(k for k, v in CPU_OFF.items() if getattr(cfg, k) != v),
    }
