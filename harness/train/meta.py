"""Full-size models without the memory: one rank of a parallel layout, built on the meta device.

A 175B-parameter model does not fit in a CPU runner, but its shapes do: on PyTorch's `meta`
device a tensor has a shape and a dtype and no storage. `fake_world(world, rank)` makes this one
process rank `rank` of `world` through torch.distributed's `fake` backend (collectives do nothing;
all-gathers hand every rank the caller's input), so a benchmark's own parallel code (megatron's
parallel_state, FSDP2 device meshes, ZeroRedundancyOptimizer) shards exactly as on the cluster.
The helpers below add up what the rank then holds; reference_impls/<name>/shapes.py use them.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import contextmanager

import torch
import torch.distributed as dist


@contextmanager
def fake_world(world_size: int, rank: int = 0):
    """This process as rank `rank` of `world_size` (no communication, no other processes)."""
    # torch ships the fake backend but registers its constructor only when this module is imported.
    import torch.testing._internal.distributed.fake_pg  # noqa: F401

    if dist.is_initialized():
        raise RuntimeError("fake_world: this process already has a default process group")
    dist.init_process_group("fake", rank=rank, world_size=world_size, store=dist.HashStore())
    real = dist.all_gather_object
    dist.all_gather_object = _all_gather_object_fake
    try:
        yield
    finally:
        dist.all_gather_object = real
        dist.destroy_process_group()


def _all_gather_object_fake(object_list: list, obj, group=None) -> None:
    """What the fake backend's all_gather_object gives (every rank the caller's object), without
    pickling it once per rank: megatron's optimizer gathers its param-group keys from every rank,
    which at 11,616 ranks cost several seconds per shard under the build's function modes."""
    object_list[:] = [obj] * len(object_list)


def local(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's shard on this rank (what the rank holds); any other tensor as it is."""
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


def numel(tensors: Iterable[torch.Tensor]) -> int:
    return sum(local(t).numel() for t in tensors)


def nbytes(tensors: Iterable[torch.Tensor]) -> int:
    return sum(local(t).numel() * t.element_size() for t in tensors)


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of a torch optimizer's per-parameter state: the moments; the scalar `step` counters
    (0-dim, kept on the CPU by torch's Adam) are not accelerator memory."""
    tensors = (v for st in optimizer.state.values() for v in st.values() if torch.is_tensor(v))
    return nbytes(t for t in tensors if local(t).dim() > 0)


def first_step(optimizer: torch.optim.Optimizer, params: Iterable[torch.Tensor]) -> None:
    """One step on zero gradients shaped like the parameters (as FSDP/DDP leave them): torch
    optimizers allocate their state lazily, at the first step."""
    for p in params:
        p.grad = torch.zeros_like(p)
    optimizer.step()


def rank_parts(parameters: int, weights: int, gradients: int, optimizer: int, **extra) -> dict:
    """One rank's holdings: a parameter count and bytes by part (the planner's part names)."""
    return dict(parameters=parameters, weights=weights, gradients=gradients, optimizer=optimizer, **extra)


def replica_parts(params: list[torch.Tensor], optimizer: torch.optim.Optimizer, **extra) -> dict:
    """A data-parallel replica: the whole model, a `param.grad` like each parameter, and the
    optimizer's state (stepped already)."""
    return rank_parts(
        parameters=numel(params),
        weights=nbytes(params),
        gradients=nbytes(params),
        optimizer=state_bytes(optimizer),
        dtypes=sorted({str(p.dtype) for p in params}),
        **extra,
    )


def shard(name: str, ranks: int, parts: dict) -> dict:
    """One distinct rank shard of a build report: which ranks hold it and what each holds."""
    return dict(
        name=name, ranks=ranks, **{k: parts[k] for k in ("parameters", "weights", "gradients", "optimizer")}
    )


def report(counted: dict, shards: list[dict], busiest: int = 0, not_built=(), built=()) -> dict:
    """What `impl.build` returns (harness/core/benchmark.py): the count, its shards, what was not built."""
    return dict(counted, shards=shards, busiest=busiest, not_built=list(not_built), built=list(built))
