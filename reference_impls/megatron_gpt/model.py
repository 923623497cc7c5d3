"""megatron-core GPTModel + DDP + Adam + cosine schedule, at every size, from a family config.

The architecture is the model provider's (`provider(cfg)`: gpt3.py's pre-LN LayerNorm, GELU MLP,
biases, learned positions, tied embeddings); dropout and init std from the config. Both devices honour
the layout and memory switches (distributed optimizer, sequence parallel, overlapped grad reduce /
param gather, activation recompute, interleaved pipeline with VP chunks) and `precision` (bf16:
bf16 params in megatron's Float16Module, fp32 master weights in the optimizer, as Megatron-LM).
CPU: the local layer spec (torch LayerNorm/Linear) over gloo with `cpu_compat` enabled. GPU: the
Transformer Engine spec when TE is installed (required for fp8) and the CUDA-only switches (fp8,
CUDA graphs, TP comm overlap). Context parallelism is refused (benchmarks/megatron_gpt.py SWITCHES).

Checkpoints: `tiny_state()` / `load_tiny_state()` move full (unsharded, TP=1 PP=1) tensors of the
model and Adam moments in and out of a sharded model, slicing along each parameter's
`partition_dim` for TP, renumbering layers for PP/VP and taking the distributed optimizer's DP
range of the moments, so one `torch.load(weights_only=True)` file serves every tiny layout. The full
size's reference checkpoint and every run checkpoint go through megatron `dist_checkpointing`
(dist_ckpt.py).
"""

from __future__ import annotations

import importlib
import math
import re

import torch

from reference_impls.megatron_gpt import adam_step, cpu_compat, layout_init


def provider(cfg):
    """The model provider module the config's class names (`MODEL_PROVIDER`, e.g. gpt3.py)."""
    return importlib.import_module(type(cfg).MODEL_PROVIDER)


def transformer_config(cfg, layout, device: str):
    from megatron.core.transformer.transformer_config import TransformerConfig

    on_gpu = device.startswith("cuda")
    bf16 = cfg.precision == "bf16"
    dtype = torch.bfloat16 if bf16 else torch.float32
    kw = {}
    if cfg.activation_recompute != "none":
        kw.update(
            recompute_granularity=cfg.activation_recompute,
            recompute_method="uniform" if cfg.activation_recompute == "full" else None,
            recompute_num_layers=1 if cfg.activation_recompute == "full" else None,
        )
    if on_gpu and cfg.fp8:  # NVIDIA v4.0: FP8_HYBRID, amax history 1024, max
        kw.update(fp8="hybrid", fp8_amax_history_len=1024, fp8_amax_compute_algo="max")
    if on_gpu and cfg.cuda_graphs:  # per-layer graphs (NVIDIA's LAYER_CUDA_GRAPH=1)
        # The graph-safe RNG tracker the graph manager asserts on is set up by train.init_parallel
        # (model_parallel_cuda_manual_seed(use_cudagraphable_rng=True)); megatron-core (0.16.1, 0.19.2) reads
        # no TransformerConfig field for it.
        kw.update(cuda_graph_impl="local")
    config_class = getattr(provider(cfg), "config_class", lambda: TransformerConfig)()
    return config_class(
        num_layers=cfg.num_layers,
        hidden_size=cfg.hidden_size,
        num_attention_heads=cfg.num_attention_heads,
        ffn_hidden_size=cfg.ffn_hidden_size,
        init_method_std=cfg.init_method_std,
        hidden_dropout=cfg.dropout,
        attention_dropout=cfg.dropout,
        tensor_model_parallel_size=layout.tp,
        **expert_parallel(cfg, layout),
        **pipeline_layout(cfg, layout),
        pipeline_model_parallel_size=layout.pp,
        virtual_pipeline_model_parallel_size=layout.vp if layout.vp > 1 else None,
        context_parallel_size=layout.cp,
        sequence_parallel=cfg.sequence_parallel and layout.tp > 1,
        tp_comm_overlap=on_gpu and cfg.tp_comm_overlap,
        bf16=bf16,
        params_dtype=dtype,
        pipeline_dtype=dtype,
        use_cpu_initialization=not on_gpu,
        gradient_accumulation_fusion=False,
        **provider(cfg).transformer_fields(cfg),
        **kw,
    )


def expert_parallel(cfg, layout) -> dict:
    """Mixtures of experts: EP from the layout and expert TP 1 (each expert whole on one rank, as
    the planner prices it; megatron's default shards experts over TP); dense models: megatron's
    defaults. The same for TransformerConfig and initialize_model_parallel (train.init_parallel)."""
    if not getattr(cfg, "num_moe_experts", None):
        return {}
    return {"expert_model_parallel_size": layout.ep, "expert_tensor_parallel_size": 1}


def pipeline_layout(cfg, layout) -> dict:
    """Where pipeline_split_counts_embedding_and_loss: the config's pipeline units (embedding, the
    layers, MTP, loss; MegatronMoeConfig.pipeline_units, what the planner prices) cut into PP x VP
    equal chunks in layer order, as megatron's pipeline_model_parallel_layout (its flat list is in
    that order: chunk v x PP + p is stage p's v-th). Else megatron's even split of the layers."""
    if layout.pp * layout.vp == 1 or not getattr(cfg, "pipeline_split_counts_embedding_and_loss", False):
        return {}
    units = ["decoder" if isinstance(u, int) else u for u in cfg.pipeline_units()]
    n = len(units) // (layout.pp * layout.vp)  # layout.derive checked that it divides
    return {"pipeline_model_parallel_layout": [units[i : i + n] for i in range(0, len(units), n)]}


def layer_spec(cfg, device: str, tcfg=None, vp_stage=None):
    """The provider's layer spec (or, for mixtures of experts, the block spec of the stage's
    layers: `tcfg` and `vp_stage` say which): with Transformer Engine where `use_te`, else local."""
    return provider(cfg).layer_spec(cfg, use_te(cfg, device), tcfg, vp_stage)


def use_te(cfg, device: str) -> bool:
    """Transformer Engine's modules: on a GPU host that has TE. What only TE implements (FP8,
    userbuffers, its RNG tracker for CUDA graphs) is refused on a GPU host without it rather
    than dropped."""
    if not device.startswith("cuda"):
        return False
    try:
        import transformer_engine  # noqa: F401
    except ImportError:
        need = [k for k in ("fp8", "cuda_graphs", "tp_comm_overlap") if getattr(cfg, k)]
        if need:
            from harness.core.errors import ConfigError

            raise ConfigError(
                f"{need[0]}: Transformer Engine is not installed; "
                "pip install --no-build-isolation -e '.[gpu]' on the GPU host"
            ) from None
        return False
    return True


def _extra_model_fields(cfg, tcfg, spec, device: str, vp_stage) -> dict:
    """GPTModel arguments that need the built config and spec (DeepSeek-V3's MTP block)."""
    hook = getattr(provider(cfg), "extra_model_fields", None)
    if hook is None:
        return {}
    return hook(cfg, tcfg, spec, use_te(cfg, device), vp_stage)


def padded_vocab(cfg, tp: int) -> int:
    """Rows of the embedding and output layer: the vocabulary rounded up to a multiple of
    make_vocab_size_divisible_by x TP (Megatron-LM's rule; the padded rows are never a target)."""
    multiple = cfg.make_vocab_size_divisible_by * tp
    return -(-cfg.vocab_size // multiple) * multiple


def build(cfg, layout, device: str, seed: int = 0):
    """(model chunks wrapped in megatron DDP, optimizer, scheduler, TransformerConfig); in bf16
    each chunk is DDP(Float16Module(GPTModel)) as in Megatron-LM (`unwrap` gets the GPTModel).
    `seed`: the run's, from which a mixture of experts draws its weights (layout_init.py)."""
    from megatron.core import parallel_state as ps
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler
    from megatron.core.transformer.module import Float16Module

    cpu_compat.enable()
    tcfg = transformer_config(cfg, layout, device)
    on_gpu = device.startswith("cuda")
    if tcfg.tp_comm_overlap:  # userbuffers must exist before the TE layers are built
        from transformer_engine.pytorch.module import base as te_base

        tokens = cfg.max_sequence_length * layout.micro_batch_size // layout.cp
        te_base.initialize_ub(shape=[tokens, cfg.hidden_size], tp_size=layout.tp, use_fp8=bool(tcfg.fp8))
    chunks = []
    vp = layout.vp if layout.vp > 1 else None
    for stage in range(vp or 1):
        vp_stage = stage if vp else None
        spec = layer_spec(cfg, device, tcfg, vp_stage)
        m = GPTModel(
            tcfg,
            spec,
            vocab_size=padded_vocab(cfg, layout.tp),
            max_sequence_length=cfg.max_sequence_length,
            pre_process=ps.is_pipeline_first_stage(ignore_virtual=vp is None, vp_stage=vp_stage),
            post_process=ps.is_pipeline_last_stage(ignore_virtual=vp is None, vp_stage=vp_stage),
            vp_stage=vp_stage,
            **provider(cfg).model_fields(cfg),
            **_extra_model_fields(cfg, tcfg, spec, device, vp_stage),
        )
        if tcfg.num_moe_experts:  # the same model at every layout (layout_init.py)
            layout_init.reinit(m, tcfg, seed, _global_names(m))
        if on_gpu:
            m = m.to(device)
        if tcfg.bf16:
            # As Megatron-LM's get_model: Float16Module inside DDP. It casts what params_dtype does
            # not reach (the learned position embedding, torch norms) to bf16 and the first stage's
            # float inputs with it; the last stage's output comes back in fp32.
            m = Float16Module(tcfg, m)
        chunks.append(m)
    ddp_cfg = DistributedDataParallelConfig(
        grad_reduce_in_fp32=True,
        overlap_grad_reduce=cfg.overlap_grad_reduce,
        use_distributed_optimizer=cfg.distributed_optimizer,
        overlap_param_gather=cfg.distributed_optimizer and cfg.overlap_param_gather,
    )
    model = [
        DistributedDataParallel(tcfg, ddp_cfg, m, disable_bucketing=(i > 0)) for i, m in enumerate(chunks)
    ]
    opt_cfg = OptimizerConfig(
        optimizer="adam",
        lr=cfg.opt_base_learning_rate,
        min_lr=cfg.opt_end_learning_rate,
        **cfg.adam(),
        clip_grad=cfg.opt_gradient_clip_norm,
        bf16=tcfg.bf16,
        params_dtype=tcfg.params_dtype,
        use_distributed_optimizer=ddp_cfg.use_distributed_optimizer,
    )
    optimizer = get_megatron_optimizer(opt_cfg, model)
    weight_decay = opt_cfg.weight_decay  # constant over the run (the rules' fixed value)
    scheduler = OptimizerParamScheduler(
        optimizer,
        init_lr=0.0,
        max_lr=cfg.opt_base_learning_rate,
        min_lr=cfg.opt_end_learning_rate,
        lr_warmup_steps=cfg.opt_learning_rate_warmup_steps,
        lr_decay_steps=cfg.decay_end_step(),
        lr_decay_style="cosine",
        start_wd=weight_decay,
        end_wd=weight_decay,
        wd_incr_steps=cfg.decay_end_step(),
        wd_incr_style="constant",
    )
    return model, optimizer, scheduler, tcfg


def unwrap(chunk):
    """The GPTModel inside one chunk of `build`'s model (under DDP and, in bf16, Float16Module)."""
    from megatron.core.utils import unwrap_model

    return unwrap_model(chunk)


def set_schedule_step(scheduler, step: int) -> None:
    """Continue the LR schedule at optimizer step `step` (the checkpoint's step at this GBS)."""
    scheduler.num_steps = 0
    scheduler.step(increment=step)


# ---- tiny checkpoints: full tensors <-> sharded model -------------------------------------------

_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.")


def _adam_slots(optimizer) -> dict:
    """model param -> (its Adam state dict, the flat range of the param that state covers or None
    for all of it, its param group, whether that optimizer keeps the step per group: adam_step.py),
    across megatron's (possibly chained) optimizers. The distributed optimizer keeps state for this
    DP rank's flat range of each param, keyed by its shard, not the param."""
    out = {}
    for o in getattr(optimizer, "chained_optimizers", [optimizer]):
        inner = o.optimizer  # torch Adam or a fused Adam; its state is a defaultdict (lookups create)
        grouped = adam_step.per_group(inner)
        group_of = {id(p): g for g in inner.param_groups for p in g["params"]}
        if hasattr(o, "model_param_group_index_map"):  # DistributedOptimizer
            for p, (gi, go) in o.model_param_group_index_map.items():
                r = o._get_model_param_range_map(p)["param"]
                g = inner.param_groups[gi]
                out[p] = (inner.state[g["params"][go]], slice(r.start, r.end), g, grouped)
            continue
        for model_g, main_g in zip(
            getattr(o, "float16_groups", []), getattr(o, "fp32_from_float16_groups", [])
        ):
            for p, main in zip(model_g, main_g):  # bf16 params: state of their fp32 master copy
                out[p] = (inner.state[main], None, group_of[id(main)], grouped)
        for g in inner.param_groups:
            for p in g["params"]:
                out.setdefault(p, (inner.state[p], None, g, grouped))
    return out


def _global_names(chunk_module):
    """(global name, tensor) of every parameter and of the routers' expert bias (a persistent
    buffer DeepSeek-V3's checkpoint carries): layer numbers made global (PP/VP offsets), experts
    by global index (EP), the tied copy renamed."""
    from megatron.core import parallel_state as ps

    experts = chunk_module.config.num_moe_experts
    first = (
        ps.get_expert_model_parallel_rank() * experts // ps.get_expert_model_parallel_world_size()
        if experts
        else 0
    )
    biases = [(n, b) for n, b in chunk_module.named_buffers() if n.endswith("router.expert_bias")]
    for name, p in [*chunk_module.named_parameters(), *biases]:
        gname = layout_init.global_expert(name, first) if not getattr(p, "allreduce", True) else name
        m = _LAYER.match(gname)
        if m:
            layer = chunk_module.decoder.layers[int(m.group(1))]
            gname = _LAYER.sub(f"decoder.layers.{layer.layer_number - 1}.", gname)
        tied = chunk_module.share_embeddings_and_output_weights  # gpt3; llama31_8b's are untied
        if tied and gname == "output_layer.weight" and not ps.is_pipeline_first_stage():
            gname = "embedding.word_embeddings.weight"  # tied copy on the last stage
        yield gname, p


def _shard(full: torch.Tensor, p: torch.nn.Parameter) -> torch.Tensor:
    full = layout_init.tp_slice(full, p)  # this TP rank's part, as megatron's CPU init slices it
    if full.shape != p.shape:
        raise ValueError(f"checkpoint tensor {tuple(full.shape)} does not fit parameter {tuple(p.shape)}")
    return full


def tiny_state(model, optimizer, step: int, consumed_samples: int) -> dict:
    """Checkpoint of a TP=1 PP=1 DP=1 model: plain tensors (torch.load(weights_only=True) reads it).
    Adam's step is stored per parameter whichever Adam wrote it (adam_step.py), so a checkpoint
    written with torch Adam (CPU) loads into TE's FusedAdam (GPU) and back."""
    slots = _adam_slots(optimizer) if optimizer is not None else {}  # None: weights only
    params, adam = {}, {}
    for chunk in model:
        for gname, p in _global_names(unwrap(chunk)):
            params[gname] = p.detach().float().cpu().clone()
            st, rng, group, grouped = slots.get(p, ({}, None, {}, False))
            if "exp_avg" in st:
                if rng is not None and rng.stop - rng.start != p.numel():
                    raise ValueError(f"{gname}: optimizer state is sharded over DP; tiny_state needs DP 1")
                adam[gname] = {
                    k: st[k].float().cpu().reshape(p.shape).clone() for k in ("exp_avg", "exp_avg_sq")
                }
                step_n = adam_step.get(grouped, group, st)
                if step_n is None:
                    raise ValueError(f"{gname}: Adam has moments but no step")
                adam[gname]["step"] = step_n
    return {
        "format": "mlperf-harness/gpt3-tiny-ckpt/1",
        "step": step,
        "consumed_samples": consumed_samples,
        "model": params,
        "adam": adam,
    }


def load_tiny_state(model, optimizer, state: dict) -> None:
    """Copy a full-tensor checkpoint into this rank's shards (params and Adam moments; TP slices
    along `partition_dim`, the distributed optimizer's DP range of the flattened param); Adam's
    step goes where the optimizer in use keeps it (per parameter or per param group)."""
    adam = state.get("adam", {})
    slots, group_steps = _adam_slots(optimizer), {}
    for chunk in model:
        for gname, p in _global_names(unwrap(chunk)):
            if gname not in state["model"]:
                raise KeyError(f"checkpoint has no tensor for parameter {gname}")
            with torch.no_grad():
                p.copy_(_shard(state["model"][gname], p))
            if gname in adam and p in slots:
                st, rng, group, grouped = slots[p]
                a = adam[gname]
                for k in ("exp_avg", "exp_avg_sq"):
                    t = _shard(a[k], p).to(p.device, torch.float32)
                    st[k] = (t if rng is None else t.reshape(-1)[rng]).clone()
                if grouped and group_steps.setdefault(id(group), a["step"]) != a["step"]:
                    raise ValueError(
                        f"{gname}: Adam step {a['step']} differs from its param group's "
                        f"{group_steps[id(group)]} (a fused Adam keeps one step per group)"
                    )
                adam_step.put(grouped, group, st, a["step"])
    optimizer.reload_model_params()  # fp32 master copies (bf16 runs) follow the loaded weights


def count_params(model) -> int:
    return sum(p.numel() for m in model for p in m.parameters())


def cosine_lr(step: int, base: float, end: float, warmup: int, decay: int) -> float:
    """The schedule in closed form (for tests): linear warmup, cosine from base to end."""
    if step < warmup:
        return base * step / warmup
    if step > decay:
        return end
    ratio = (step - warmup) / (decay - warmup)
    return end + 0.5 * (base - end) * (1 + math.cos(math.pi * ratio))
