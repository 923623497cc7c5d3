"""GPT-3 checkpoints in megatron-core's `dist_checkpointing` format, at every size and layout.

    save(model, optimizer, folder)   every rank, collectively: its shards of the model and of the
                                     optimizer, written in parallel into one folder
    load(model, optimizer, folder)   every rank: its shards back, whatever layout wrote them

What a checkpoint holds is megatron's sharded state: every parameter as a ShardedTensor of its
global shape (TP shards and PP/VP stages keyed by global layer numbers, the tied output embedding
as the input one), and the optimizer's `sharded_state_dict`: Adam's step and param groups and its
per-parameter state. Adam's step is where the Adam megatron picked keeps it (adam_step.py): torch
Adam per parameter (megatron saves it as one `common_step`, or in the distributed optimizer's
param groups), TE's/Apex's FusedAdam per param group (saved with the groups); `load` fills a fresh
torch Adam's per-parameter state first and works around megatron's torch-Adam step
handling, and leaves a fused Adam's state as megatron builds it (a per-parameter step there would
break TE's state_dict()). A plain optimizer's state is in model space (`exp_avg`/`exp_avg_sq` shaped
like the parameter), so it loads at any TP/PP/VP/DP layout. The distributed optimizer's parameter
state (fp32 master weights, `exp_avg`, `exp_avg_sq` of each DP rank's range) has two forms used
here (a third, "fully_sharded_model_space", was refused by 0.16.1 and is marked for deprecation in
0.19.2):
    RUN_SHARDING "dp_reshardable"       each rank writes its own flat ranges, no exchange: the
                                        form megatron trains with; loads at the same TP/PP, any DP
    "fully_reshardable"                 gathered over DP into model space first (every rank then
                                        writes a share): loads at any layout, but holds the whole
                                        DP group's state on each rank for the save (≈66 GB per
                                        rank at dgx-h100x64), so only for moving between layouts
Run checkpoints use RUN_SHARDING (a resume has the run's own layout); the reference checkpoint
is read as START_SHARDING, the model-space form a checkpoint written elsewhere can have. A plain
and a distributed optimizer's state differ in form and do not load into each other. Save uses
the default `torch_dist` strategy wrapped to spread DP-replicated tensors (the model's weights)
over the DP ranks, so every rank writes a share in parallel.

`run_state` plugs this into the run checkpointer (harness/train/run_checkpoint.py) as its sharded
writer/reader; the full size starts from the reference checkpoint through `load`.
"""

from __future__ import annotations

from pathlib import Path

RUN_SHARDING = "dp_reshardable"
START_SHARDING = "fully_reshardable"


def _model_sharded(model) -> dict:
    """The model's sharded state, one entry per chunk under megatron's own names."""
    return {_key(i, len(model)): m.module.sharded_state_dict() for i, m in enumerate(model)}


def _load_model(model, loaded: dict) -> None:
    for i, m in enumerate(model):
        m.module.load_state_dict(loaded[_key(i, len(model))])


def _sharded(model, optimizer, is_loading: bool, sharding: str) -> dict:
    sd = _model_sharded(model)
    meta = {"distrib_optim_sharding_type": sharding}  # read by the distributed optimizer only
    sd["optimizer"] = optimizer.sharded_state_dict(sd, is_loading=is_loading, metadata=meta)
    return sd


def _key(i: int, chunks: int) -> str:
    return f"model{i}" if chunks > 1 else "model"  # megatron's own names (VP chunks)


def save(model, optimizer, folder: Path, sharding: str = RUN_SHARDING) -> None:
    """Collective. The model's parameters must be current on every rank: with overlapped param
    gather they are after any forward pass (the eval before a checkpoint)."""
    from megatron.core import dist_checkpointing
    from megatron.core import parallel_state as ps
    from megatron.core.dist_checkpointing.serialization import get_default_save_sharded_strategy
    from megatron.core.dist_checkpointing.strategies.fully_parallel import (
        FullyParallelSaveStrategyWrapper,
    )

    strategy = FullyParallelSaveStrategyWrapper(
        get_default_save_sharded_strategy(), ps.get_data_parallel_group(with_context_parallel=True)
    )
    sd = _sharded(model, optimizer, False, sharding)
    _in_process_write_results()
    _quiet_async_deprecation()
    dist_checkpointing.save(sd, str(folder), sharded_strategy=strategy)


def _in_process_write_results() -> None:
    """Our saves are synchronous: `dist_checkpointing.save` runs the torch_dist writer in this
    process (AsyncRequest.execute_sync), which forks one writer per bucket and then puts their
    results on a queue that this same process reads back. megatron-core (0.16.1, 0.19.2) makes that queue,
    on first use in a process, with a multiprocessing Manager started by *spawn*: a server
    process that re-imports the rank's main module and lives to the end of the run, for the
    async path's sake (there the results do cross processes). In a sync save a thread queue
    carries the same objects; it spares each rank that process (measured: ~4 s at the first
    save on 2 cores, ~10 % of a tiny run). Done only where megatron's cache is still empty, so
    an async caller that made its Manager queue keeps it."""
    import queue

    from megatron.core.dist_checkpointing.strategies import filesystem_async

    if getattr(filesystem_async, "_results_queue", False) is None:
        filesystem_async._results_queue = queue.Queue()


def _quiet_async_deprecation() -> None:
    """megatron-core 0.19.2 runs a synchronous save through its own async writer
    (TorchDistSaveShardedStrategy.save -> async_save(async_strategy="mcore") -> execute_sync) and
    so logs, once per process, that "MCore's async save is deprecated". Our saves are not async
    (nothing is deprecated on this path), so the line would only mislead a reader of the rank's
    output; its once-only flag is set as if it had been logged."""
    from megatron.core.dist_checkpointing.strategies import torch as mtorch

    if hasattr(mtorch, "_logged_mcore_async_deprecation"):
        mtorch._logged_mcore_async_deprecation = True


def load(model, optimizer, folder: Path, sharding: str = RUN_SHARDING) -> None:
    """Collective. Parameters, Adam moments and step, and (distributed optimizer) master weights."""
    import torch
    from megatron.core import dist_checkpointing

    _prime(optimizer)
    _keep_torch_adam_step()
    loaded = dist_checkpointing.load(_sharded(model, optimizer, True, sharding), str(folder))
    _load_model(model, loaded)
    with torch.no_grad():  # fp32 master weights are views of the params: an in-place copy
        optimizer.load_state_dict(loaded["optimizer"])


def load_weights(model, optimizer, folder: Path) -> None:
    """Collective. The model's weights only (and persistent buffers: DeepSeek's expert bias), as
    the reference's `load_optim=False`: the optimizer stays fresh, its fp32 master weights (bf16,
    distributed optimizer) copied from the loaded ones."""
    from megatron.core import dist_checkpointing

    _load_model(model, dist_checkpointing.load(_model_sharded(model), str(folder)))
    optimizer.reload_model_params()


def save_weights(model, folder: Path) -> None:
    """Collective. The model's sharded weights only: what `load_weights` reads (a converted
    starting checkpoint's form; tests write one at tiny size)."""
    from megatron.core import dist_checkpointing

    _in_process_write_results()
    _quiet_async_deprecation()
    Path(folder).mkdir(parents=True, exist_ok=True)  # megatron writes into an existing, empty folder
    dist_checkpointing.save(_model_sharded(model), str(folder))


def _prime(optimizer) -> None:
    """Give a fresh torch Adam its state (zeros, step 0; the load overwrites them): without TE or
    Apex, the distributed optimizer reads every param state's `step` when it builds the sharded
    dict to load into, and torch Adam has none before its first step. A fused Adam (step per
    group) is left alone: megatron allocates its moments, and TE's FusedAdam refuses any other
    per-parameter key (its state_dict() raises KeyError 'step')."""
    import torch

    from reference_impls.megatron_gpt import adam_step

    for o in getattr(optimizer, "chained_optimizers", [optimizer]):
        if adam_step.per_group(o.optimizer):
            continue
        for group in o.optimizer.param_groups:
            for p in group["params"]:
                st = o.optimizer.state[p]
                if not st:
                    z = torch.zeros_like(p, dtype=torch.float32)
                    st.update(exp_avg=z, exp_avg_sq=z.clone(), step=torch.tensor(0.0))


def _keep_torch_adam_step() -> None:
    """megatron-core with torch Adam (no TE/Apex, so a per-param `step` tensor; 0.16.1 and 0.19.2,
    distrib_optimizer.py load_state_dict, `s["step"] = step` for every state): the
    distributed optimizer's load_state_dict sets every param's step from the checkpoint's param
    groups, but as ONE tensor shared by all params (torch Adam then advances it once per param per
    step), and its parameter-state loaders then overwrite it: "dp_reshardable" with the step the
    state had before the load (a non-persistent object), "fully_reshardable" with nothing
    (KeyError 'step'). Give each param its own copy of the groups' step and keep it; every other
    tensor loads as megatron intends."""
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer as DO

    orig = DO._set_main_param_and_optimizer_states
    if getattr(orig, "keeps_step", False):
        return

    def set_states(self, model_param, tensors):
        gi, go = self.model_param_group_index_map[model_param]
        state = self.optimizer.state[self.optimizer.param_groups[gi]["params"][go]]
        if "step" in state:
            state["step"] = state["step"].clone()
            tensors = {**tensors, "step": state["step"]}
        return orig(self, model_param, tensors)

    set_states.keeps_step = True
    DO._set_main_param_and_optimizer_states = set_states


def resume_load(model, optimizer, folder: Path) -> None:
    """`load` in the run's own form, a checkpoint that does not fit as one line (exit 2)."""
    from megatron.core.dist_checkpointing.core import CheckpointingException

    from harness.core.errors import USAGE, HarnessError

    try:
        load(model, optimizer, folder)
    except CheckpointingException as e:  # e.g. written at another TP/PP (dp_reshardable)
        raise HarnessError(f"cannot resume: {folder}: {str(e).splitlines()[0]}", USAGE) from None


def run_state(model, optimizer):
    """The run checkpointer's sharded writer/reader (harness/train/run_checkpoint.py)."""
    from harness.train.run_checkpoint import ModelState

    return ModelState(save, resume_load, model, optimizer)
