"""DeepSeek-V3 as the deepseekv3_671b reference builds it (mlcommons/training llm_moe_pretraining,
Megatron-Bridge): multi-latent attention (compressed queries and a shared key/value latent, a
per-head rope part, RMSNorms on the latents, YaRN), the first moe_first_dense_layers layers dense
and the rest MoE (a sigmoid router with DeepSeek's expert bias and group-limited top-k, routed
weights scaled, one shared expert, the sequence-level aux loss), multi-token prediction, untied
embeddings. The run starts from the weights of a checkpoint, with a fresh optimizer (full: the
reference's converted checkpoint; tiny: one that `prepare` pretrains)."""

from __future__ import annotations

import dataclasses

from reference_impls.megatron_gpt import gpt_oss, llama31

START_DIR = "deepseekv3_mcore"
FULL_DATA = dataclasses.replace(
    llama31.FULL_DATA,  # the reference reads the same C4 and Llama 3.1 tokenizer as llama31_8b
    files=(
        *llama31.FULL_DATA.files,
        (
            f"{START_DIR}/metadata.json",
            "the MLCommons DeepSeek-V3 starting checkpoint (members only: "
            "https://training.mlcommons-storage.org/metadata/deepseekv3_checkpoint_bf16.uri, HuggingFace "
            "format, ~1.4 TB: DeepSeek-V3 after 50 steps with the Llama 3.1 tokenizer) converted to megatron "
            "dist_checkpointing by the reference's run_conversion.sh (mlcommons/training "
            "llm_moe_pretraining/nemo README: 'Checkpoint Preprocessing'); its iter_0000000 folder here",
        ),
    ),
    start_dir=START_DIR,
)
"""C4 with the Llama 3.1 tokenizer (the reference's, as llama31_8b), and the converted checkpoint."""

TIED_EMBEDDINGS = False
ROUTED_SCALING = 2.5  # DeepSeek-V3's routed_scaling_factor


def config_class():
    from megatron.core.transformer.transformer_config import MLATransformerConfig

    return MLATransformerConfig


def transformer_fields(cfg) -> dict:
    """The architecture's TransformerConfig (MLATransformerConfig) fields."""
    moe = gpt_oss.moe_fields(cfg)
    if cfg.moe_aux_loss_coeff:
        moe["moe_router_load_balancing_type"] = "seq_aux_loss"
    return {
        **llama31.rmsnorm_swiglu(cfg),
        "masked_softmax_fusion": False,
        "multi_latent_attention": True,
        "q_lora_rank": cfg.q_lora_rank or None,
        "kv_lora_rank": cfg.kv_lora_rank,
        "qk_head_dim": cfg.qk_head_dim,
        "qk_pos_emb_head_dim": cfg.qk_pos_emb_head_dim,
        "v_head_dim": cfg.v_head_dim,
        "kv_channels": cfg.v_head_dim,
        "qk_layernorm": True,
        "rope_type": "yarn",
        "rotary_base": cfg.rotary_base,
        "moe_router_topk_scaling_factor": ROUTED_SCALING,
        "mtp_num_layers": cfg.mtp_num_layers or None,
        **moe,
    }


def _mla_core_attention():
    """megatron's MLA passes k_channels/v_channels to its core attention; the local
    DotProductAttention takes neither (the TE one does): accept them, size the context by v."""
    from megatron.core.transformer.dot_product_attention import DotProductAttention

    class MLADotProductAttention(DotProductAttention):
        def __init__(self, *args, k_channels=None, v_channels=None, **kwargs):
            super().__init__(*args, **kwargs)
            if v_channels is not None:
                self.hidden_size_per_partition = v_channels * self.num_attention_heads_per_partition

    return MLADotProductAttention


_PATCHED: dict = {}


def _sum_rope_key_grad_over_tp(kv_lora_rank: int, rope_dim: int) -> None:
    """megatron's local-spec MLA at TP > 1 gathers the key/value latent and the shared rope key
    over TP (multi_latent_attention.py, gather_from_tensor_model_parallel_region) with a backward
    that only splits; the rope key is shared by every head, so each TP rank's gradient for it is a
    partial sum over its heads and must be summed over TP (megatron's TE branch does: a
    reduce-scatter). Measured on the tiny model, TP 2 + SP + distributed optimizer, expert bias off:
    without this all-reduce of the rope columns in that gather's backward the first eval is 7.8e-4
    off one process; with it 4.4e-9."""
    import megatron.core.transformer.multi_latent_attention as mla
    import torch
    from megatron.core import parallel_state as ps
    from megatron.core.tensor_parallel import mappings

    width = kv_lora_rank + rope_dim
    if _PATCHED.get("width") == width:
        return
    gather = _PATCHED.setdefault("orig", mla.gather_from_tensor_model_parallel_region)

    class _GatherKV(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, group):
            ctx.group = group
            return mappings._gather_along_last_dim(x, group)

        @staticmethod
        def backward(ctx, g):
            g = g.clone()
            rope = g[..., kv_lora_rank:].contiguous()
            torch.distributed.all_reduce(rope, group=ctx.group)
            g[..., kv_lora_rank:] = rope
            return mappings._split_along_last_dim(g, ctx.group), None

    def gather_kv(x, group=None):
        group = group or ps.get_tensor_model_parallel_group()
        if group.size() > 1 and x.size(-1) * group.size() == width:
            return _GatherKV.apply(x, group)
        return gather(x, group)

    mla.gather_from_tensor_model_parallel_region = gather_kv
    _PATCHED["width"] = width


def layer_spec(cfg, te: bool, tcfg=None, vp_stage=None):
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec

    spec = get_gpt_decoder_block_spec(
        tcfg, use_transformer_engine=te, normalization="RMSNorm", vp_stage=vp_stage
    )
    if not te:
        _sum_rope_key_grad_over_tp(cfg.kv_lora_rank, cfg.qk_pos_emb_head_dim)
        core = _mla_core_attention()
        for layer in spec.layer_specs:
            layer.submodules.self_attention.submodules.core_attention = core
    return spec


def model_fields(cfg) -> dict:
    return {"share_embeddings_and_output_weights": TIED_EMBEDDINGS, "position_embedding_type": "rope"}


def extra_model_fields(cfg, tcfg, spec, te: bool, vp_stage=None) -> dict:
    """The MTP block after the main model (on the last stage)."""
    if not cfg.mtp_num_layers:
        return {}
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_mtp_block_spec

    return {
        "mtp_block_spec": get_gpt_mtp_block_spec(
            tcfg, spec.layer_specs[-1], use_transformer_engine=te, vp_stage=vp_stage
        )
    }
