"""Llama 3.1 as the llama31_8b reference builds it (NeMo 2 / Megatron's Llama31Config8B): RMSNorm,
SwiGLU MLP (ffn_hidden_size per branch), no biases, grouped-query attention (num_query_groups
KV heads), RoPE with base rotary_base and Llama 3.1's low-frequency scaling, untied input and
output embeddings. Everything else (parallelism, precision, recompute, FP8, CUDA graphs) is the
family's, from the config (model.py)."""

from __future__ import annotations

from reference_impls.megatron_gpt.datafiles import FullData

_WHERE = "https://training.mlcommons-storage.org/metadata/llama-3-1-8b-{}.uri (the MLCommons R2 downloader; mlcommons/training small_llm_pretraining README)"
FULL_DATA = FullData(
    train_prefixes=("c4-train.en_6_text_document",),
    valid_prefix="c4-validation-91205-samples.en_text_document",
    eod=128001,  # <|end_of_text|> of the Llama 3.1 tokenizer
    source="the MLCommons Llama-3.1-tokenized C4, " + _WHERE.format("preprocessed-c4-dataset"),
    files=(("tokenizer/tokenizer.json", "the Llama 3.1 8B tokenizer, " + _WHERE.format("tokenizer")),),
)
"""C4 en 3.0.1 tokenized with the Llama 3.1 tokenizer (shards 768-1023 merged, ~80 GB; the first
91,205 validation documents), and the tokenizer (read for its facts only: data is pre-tokenized)."""

TIED_EMBEDDINGS = False


def rmsnorm_swiglu(cfg, bias: bool = False) -> dict:
    """RMSNorm and SwiGLU MLPs: what Llama 3.1, gpt-oss and DeepSeek-V3 share."""
    import torch.nn.functional as F

    return {
        "normalization": "RMSNorm",
        "layernorm_epsilon": cfg.norm_epsilon,
        "add_bias_linear": bias,
        "gated_linear_unit": True,
        "activation_func": F.silu,
        "bias_activation_fusion": False,  # megatron's fused SwiGLU kernel is CUDA's; the CPU runs it eagerly
    }


def transformer_fields(cfg) -> dict:
    """The architecture's TransformerConfig fields."""
    return {**rmsnorm_swiglu(cfg), "num_query_groups": cfg.num_query_groups}


def layer_spec(cfg, te: bool, tcfg=None, vp_stage=None):
    """Transformer Engine's fused layers where TE is installed on a GPU host, else megatron's local
    spec with torch's RMSNorm (the CPU path)."""
    from megatron.core.models.gpt import gpt_layer_specs as specs

    if te:
        return specs.get_gpt_layer_with_transformer_engine_spec()
    return specs.get_gpt_layer_local_spec(normalization="RMSNorm")


def model_fields(cfg) -> dict:
    """GPTModel's keyword arguments beyond the shared ones."""
    return {
        "share_embeddings_and_output_weights": TIED_EMBEDDINGS,
        "position_embedding_type": "rope",
        "rotary_base": cfg.rotary_base,
        "rope_scaling": cfg.rope_scaling_factor != 1.0,
        "rope_scaling_factor": cfg.rope_scaling_factor,
    }
