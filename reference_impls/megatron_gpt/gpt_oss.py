"""gpt-oss-20b as the gpt_oss_20b reference builds it (mlcommons/training small_llm_moe_pretraining,
Megatron): every layer a mixture of experts (softmax router, top-k of num_moe_experts SwiGLU
experts, no shared expert), grouped-query attention with head width kv_channels, a sliding window on
alternating layers, RMSNorm, RoPE, untied embeddings; the original model's attention sinks and linear
biases as switches (the config's attention_sinks / add_bias_linear). Expert parallelism, the token
dispatcher and grouped GEMM come from the config and layout (model.py); the rest is the family's."""

from __future__ import annotations

from reference_impls.megatron_gpt import llama31

FULL_DATA = llama31.FULL_DATA
"""The reference trains on llama31_8b's data: C4 tokenized with the Llama 3.1 tokenizer."""

TIED_EMBEDDINGS = False


def transformer_fields(cfg) -> dict:
    """The architecture's TransformerConfig fields."""
    window = {}
    if cfg.window_size:  # megatron: (left, right) tokens; the full layers are every N-th one
        window = {"window_size": (cfg.window_size, 0), "window_attn_skip_freq": cfg.window_attn_skip_freq}
    return {
        **llama31.rmsnorm_swiglu(cfg, cfg.add_bias_linear),
        "masked_softmax_fusion": False,  # the windowed mask is built by the unfused softmax
        "num_query_groups": cfg.num_query_groups,
        "kv_channels": cfg.head_dim,
        "softmax_type": "learnable" if cfg.attention_sinks else "vanilla",
        **window,
        **moe_fields(cfg),
    }


def moe_fields(cfg) -> dict:
    """The MoE block's TransformerConfig fields (shared with DeepSeek-V3's provider)."""
    balance = "aux_loss" if cfg.moe_aux_loss_coeff else "none"
    dense = cfg.moe_first_dense_layers
    groups = {}
    if cfg.moe_router_num_groups:  # group-limited routing (DeepSeek-V3: 8 groups, top 4)
        groups = {
            "moe_router_num_groups": cfg.moe_router_num_groups,
            "moe_router_group_topk": cfg.moe_router_group_topk,
        }
    return {
        "moe_layer_freq": [0] * dense + [1] * (cfg.num_layers - dense) if dense else 1,
        "moe_shared_expert_intermediate_size": cfg.moe_shared_expert_intermediate_size or None,
        "moe_router_enable_expert_bias": cfg.moe_router_enable_expert_bias,
        **groups,
        "num_moe_experts": cfg.num_moe_experts,
        "moe_router_topk": cfg.moe_router_topk,
        "moe_ffn_hidden_size": cfg.moe_ffn_hidden_size,
        "moe_router_score_function": cfg.moe_router_score_function,
        "moe_router_load_balancing_type": balance,
        "moe_aux_loss_coeff": cfg.moe_aux_loss_coeff,
        "moe_router_dtype": "fp32",  # the router's softmax and top-k in fp32 under bf16 too
        "moe_token_dispatcher_type": "flex" if cfg.moe_flex_dispatcher else cfg.moe_token_dispatcher_type,
        "moe_grouped_gemm": cfg.moe_grouped_gemm,
    }


def layer_spec(cfg, te: bool, tcfg=None, vp_stage=None):
    """megatron's decoder block spec for this stage's layers (MoE layers: router, experts), with
    Transformer Engine's fused layers where TE is installed on a GPU host, else the local spec."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec

    return get_gpt_decoder_block_spec(
        tcfg, use_transformer_engine=te, normalization="RMSNorm", vp_stage=vp_stage
    )


def model_fields(cfg) -> dict:
    """GPTModel's keyword arguments beyond the shared ones."""
    return {
        "share_embeddings_and_output_weights": TIED_EMBEDDINGS,
        "position_embedding_type": "rope",
        "rotary_base": cfg.rotary_base,
    }
