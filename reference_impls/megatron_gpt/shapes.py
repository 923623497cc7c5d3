"""GPT-3 without the memory: every pipeline stage's rank of a layout, built as the config says.

`count(cfg, layout, device)` runs the training's own `train.init_parallel` (groups and the RNG
tracker the config needs) and `model.build(cfg, layout, device)` once per pipeline stage, as TP rank
0 / DP rank 0 of a fake world of `layout.world_size` ranks (harness/train/meta.py). On "cuda" (the
GPU path: bf16 parameters, megatron DDP with fp32 gradient buffers, Adam, the distributed optimizer
when the config turns it on) every tensor lands on the meta device; on "cpu" (tiny) the model is
built for real, small as it is. It returns the parameter total and, per stage (every virtual chunk
of it), the bytes that rank holds: weights (the DDP parameter buffers), gradients (the DDP gradient
buffers), optimizer (fp32 master copies of bf16 parameters + Adam moments, this rank's shard under
the distributed optimizer). Every TP, CP and DP rank of a stage holds the same shapes.

Every switch is built as the config sets it, sequence parallel and CUDA graphs included: with
`cuda_graphs` each layer gets megatron's CudaGraphManager, which asserts at construction that the
RNG tracker is graph-safe. What the build cannot reach is reported, not refused:
  - Transformer Engine, where it is not installed: `fp8` (FP8 GEMMs) and `tp_comm_overlap`
    (userbuffers) are not built, and megatron's local spec stands in for the TE layer spec (the
    same tensors; torch LayerNorm and linear apart): one `not_built` line names them.
  - What needs a GPU at run time: CUDA graph capture (the first steps), NCCL.
  - gloo process groups: a fake world cannot rendezvous gloo; megatron needs them only to gather the
    distributed optimizer's state on the CPU when it saves a checkpoint.
The CUDA calls the graph manager makes at construction (device capability, mempool handle, side
stream) and torch's graph-safe generator hooks are stood in for on a CPU-only torch (`_cuda_stubs`).
The vocabulary is padded as the training pads it (`model.padded_vocab`: a multiple of
make_vocab_size_divisible_by x TP, Megatron-LM's rule; 50257 -> 50688 at TP 4).
"""

from __future__ import annotations

import functools
import importlib.util
from contextlib import ExitStack, contextmanager

import torch
from torch.overrides import TorchFunctionMode

from harness.train import meta
from reference_impls.megatron_gpt import cpu_compat, train
from reference_impls.megatron_gpt import model as gmodel

NEEDS_TE = ("fp8", "tp_comm_overlap")
"""Switches whose kernels only Transformer Engine has (not built where TE is absent)."""

_CUDA_TYPE = {
    torch.bfloat16: "torch.cuda.BFloat16Tensor",
    torch.float16: "torch.cuda.HalfTensor",
    torch.float32: "torch.cuda.FloatTensor",
}


def have_te() -> bool:
    return importlib.util.find_spec("transformer_engine") is not None


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


def _patch(stack: ExitStack, obj, name: str, value) -> None:
    missing = object()
    old = getattr(obj, name, missing)
    setattr(obj, name, value)
    stack.callback(lambda: delattr(obj, name) if old is missing else setattr(obj, name, old))


def _graph_safe_rng_state(device="cuda", clone=False, graph_safe=False):
    """megatron's `_get_cuda_rng_state` on the CPU generator: graph-safe states are Generators
    (a copy: a CPU generator has no `graphsafe_get_state`), the others byte tensors."""
    if not graph_safe:
        return torch.get_rng_state()
    g = torch.Generator()
    g.set_state(torch.get_rng_state())
    return g


def _set_graph_safe_rng_state(state, device=-1, graph_safe=False):
    torch.set_rng_state(state.get_state() if graph_safe else state)


def _cuda_stubs(stack: ExitStack) -> None:
    """What megatron's graph manager and graph-safe RNG tracker ask of CUDA at construction, on a
    CPU-only torch: an H100's capability (it picks an allocator check), a mempool handle and a side
    stream (capture would use them), and torch's generator-registration hook the tracker checks for."""
    import megatron.core.tensor_parallel.random as mrandom
    from megatron.core.transformer import cuda_graphs

    _patch(stack, torch.cuda, "get_device_capability", lambda *a, **k: (9, 0))
    _patch(stack, torch.cuda, "graph_pool_handle", lambda: ("meta-mempool",))
    _patch(stack, torch.cuda, "Stream", lambda *a, **k: None)
    _patch(stack, torch.cuda, "set_stream", lambda *a, **k: None)
    if not hasattr(torch.cuda.CUDAGraph, "register_generator_state"):
        _patch(stack, torch.cuda.CUDAGraph, "register_generator_state", lambda self, g: None)
    _patch(stack, mrandom, "_get_cuda_rng_state", _graph_safe_rng_state)
    _patch(stack, mrandom, "_set_cuda_rng_state", _set_graph_safe_rng_state)
    stack.callback(setattr, cuda_graphs.CudaGraphManager, "global_mempool", None)


_RANK_GROUPS: dict = {}


def _rank_groups(real):
    """megatron's rank-group generator, remembered per (world, sizes, mask) for the process: a pure
    function that parallel_state calls ~20 times per rank built, each a Python loop over the whole
    world (at 11,616 ranks ~1 s of the build's per-shard time), and the build makes one rank per
    distinct shard. Lists handed out are copies."""

    def groups(world_size, parallel_size, mask):
        key = (world_size, tuple(parallel_size), tuple(mask))
        if key not in _RANK_GROUPS:
            _RANK_GROUPS[key] = real(world_size, parallel_size, mask)
        return [list(g) for g in _RANK_GROUPS[key]]

    return groups


@contextmanager
def _cuda_env(device: str):
    """The build's surroundings: CUDA stood in for on a CPU-only torch, the TE layer spec replaced
    by megatron's local one where TE is absent (reported by `not_built`), no gloo groups."""
    import megatron.core.optimizer as mopt
    import megatron.core.parallel_state as ps

    cpu_compat.enable()  # first: its CUDA->CPU mode must sit below ours (ours runs first)
    with ExitStack() as stack:
        if device.startswith("cuda") and not torch.cuda.is_available():
            _cuda_stubs(stack)
        if device.startswith("cuda") and not have_te():
            _patch(
                stack,
                gmodel,
                "layer_spec",
                lambda cfg, dev, tcfg=None, vp=None: gmodel.provider(cfg).layer_spec(cfg, False, tcfg, vp),
            )
        _patch(
            stack,
            ps,
            "generate_masked_orthogonal_rank_groups",
            _rank_groups(ps.generate_masked_orthogonal_rank_groups),
        )
        build_opt = mopt.get_megatron_optimizer
        _patch(
            stack, mopt, "get_megatron_optimizer", functools.partial(build_opt, use_gloo_process_groups=False)
        )
        yield


@contextmanager
def _on_meta(device: str):
    """On "cuda", every CUDA tensor (parameters, DDP and optimizer buffers) on the meta device."""
    if not device.startswith("cuda"):
        yield
        return
    with ExitStack() as stack:
        _patch(stack, torch.cuda, "current_device", lambda: torch.device("meta"))
        stack.enter_context(torch.device("meta"))
        stack.enter_context(_CudaToMeta())
        yield


def not_built(cfg, device: str) -> list[str]:
    """One line per absent library: the parts of this config the build could not construct."""
    if not device.startswith("cuda") or have_te():
        return []
    parts = [k for k in NEEDS_TE if getattr(cfg, k)] + [
        "the TE layer spec (megatron's local spec built: same tensors)"
    ]
    return ["Transformer Engine is not installed: " + ", ".join(parts)]


def build_config(cfg, device: str):
    """The config as built: the TE-only switches off where TE is absent (`not_built` names them)."""
    if not device.startswith("cuda") or have_te():
        return cfg
    return cfg.model_copy(update=dict.fromkeys(NEEDS_TE, False))


def build_rank(cfg, layout, rank: int, device: str = "cuda"):
    """`model.build` as rank `rank` of the layout: (stage, model chunks, optimizer, RNG tracker)."""
    from megatron.core import parallel_state as ps
    from megatron.core.tensor_parallel.random import get_cuda_rng_tracker

    with _cuda_env(device):
        train.init_parallel(layout, 0, cfg, gloo=False)  # the training's groups and RNG tracker
        try:
            with _on_meta(device):
                model, optimizer, _, _ = gmodel.build(cfg, layout, device)
            return ps.get_pipeline_model_parallel_rank(), model, optimizer, get_cuda_rng_tracker()
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


def _full_size(chunk, tp: int, ep: int = 1) -> int:
    """Parameters of this chunk in the unsharded model: TP-split tensors count TP times,
    replicated ones once, the last stage's copy of the word embedding (tied output layer, or MTP's
    input embedding) not at all; a rank's experts (megatron marks their params allreduce=False)
    are 1/EP of the layer's (expert TP 1)."""
    n = 0
    for name, p in chunk.named_parameters():
        tied = name == "output_layer.weight" and chunk.share_embeddings_and_output_weights
        if (tied or name == "embedding.word_embeddings.weight") and not chunk.pre_process:
            continue
        if not getattr(p, "allreduce", True):
            n += p.numel() * ep
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


def count(cfg, layout, device: str = "cuda") -> dict:
    """Parameter total and per-stage holdings of the busiest (TP 0, DP 0) rank of each stage."""
    bcfg = build_config(cfg, device)
    per_stage = layout.world_size // layout.pp
    stages, total, graphs, graph_layers, tracker = {}, 0, 0, 0, None
    for stage in range(layout.pp):
        with meta.fake_world(layout.world_size, rank=stage * per_stage):
            got, model, optimizer, tracker = build_rank(bcfg, layout, stage * per_stage, device)
            if got != stage:
                raise RuntimeError(f"rank {stage * per_stage} is pipeline stage {got}, expected {stage}")
            gpts = [gmodel.unwrap(m) for m in model]
            stages[stage] = dict(
                stage_parts(model, optimizer),
                chunks=len(model),
                layers=sum(len(g.decoder.layers) for g in gpts),
                ranks=per_stage,
            )
            total += sum(_full_size(g, layout.tp, layout.ep) for g in gpts)
            managed = [m for g in gpts for m in g.modules() if hasattr(m, "cudagraph_manager")]
            graphs += len(managed)
            graph_layers += sum(1 for m in managed if type(m).__name__ == "TransformerLayer")
    busiest = max(
        stages, key=lambda s: stages[s]["weights"] + stages[s]["gradients"] + stages[s]["optimizer"]
    )
    built = []
    if cfg.cuda_graphs and device.startswith("cuda"):
        built.append(
            f"CUDA graphs: megatron's CudaGraphManager on {graph_layers} layer(s) ({graphs} module(s) "
            f"in all; cuda_graph_impl=local) over {type(tracker).__name__}"
            f"(use_cudagraphable_rng={getattr(tracker, 'use_cudagraphable_rng', None)}); "
            "capture needs a GPU (the first steps)"
        )
    return {
        "parameters_total": total,
        "parameters_trainable": total,
        "rank": dict(stages[busiest], stage=busiest),
        "stages": stages,
        "vocab_rows": gmodel.padded_vocab(bcfg, layout.tp),  # embedding/output rows as built
        "not_built": not_built(cfg, device),
        "built": built,
    }


def build_report(cfg, layout, device: str) -> dict:
    """`mlperf run --dry-run --build`: every stage's shard (impl.build)."""
    c = count(cfg, layout, device)
    shards = [
        meta.shard(f"stage {s} ({p['chunks']} chunk(s), {p['layers']} layers)", p["ranks"], p)
        for s, p in c["stages"].items()
    ]
    return meta.report(c, shards, busiest=c["rank"]["stage"], not_built=c["not_built"], built=c["built"])
