"""GPT-3 as the reference builds it (the family's first model provider): pre-LN LayerNorm, GELU
MLP (ffn_hidden_size), biases in every linear, learned absolute positions, input and output
embeddings tied. Everything else (parallelism, precision, recompute, FP8, CUDA graphs) is the
family's, from the config (model.py)."""

from __future__ import annotations

from reference_impls.megatron_gpt.datafiles import FULL_CHECKPOINT_DIR, FullData

FULL_DATA = FullData(
    train_prefixes=("c4_en_6_c4_spm_text_document", "c4_en_7_c4_spm_text_document"),
    valid_prefix="c4_en_validation_subset_c4_spm_text_document",
    eod=1,  # the C4 SentencePiece model's end of document
    source="the MLCommons preprocessed C4 (`dataset_c4_spm.tar`, see mlcommons/training gpt3 README: "
    "'Preprocessed data download')",
    files=(
        (
            f"{FULL_CHECKPOINT_DIR}/metadata.json",
            "the MLCommons GPT-3 reference checkpoint `ckpt4000-consumed_samples=0` (mlcommons/training "
            "gpt3 README: 'Checkpoint download'), in megatron dist_checkpointing format",
        ),
    ),
    start_dir=FULL_CHECKPOINT_DIR,
)
"""C4 tokenized with the reference's SentencePiece model, and the 4000-step reference checkpoint."""

TIED_EMBEDDINGS = True
"""The output layer is the word embedding (its copy on the last pipeline stage is kept in sync)."""


def transformer_fields(cfg) -> dict:
    """The architecture's TransformerConfig fields (megatron's defaults give GELU, no GLU)."""
    return {"add_bias_linear": True, "normalization": "LayerNorm"}


def layer_spec(cfg, te: bool, tcfg=None, vp_stage=None):
    """Transformer Engine's fused layers where TE is installed on a GPU host, else megatron's local
    spec (torch LayerNorm and linears: the CPU path)."""
    from megatron.core.models.gpt import gpt_layer_specs as specs

    return specs.get_gpt_layer_with_transformer_engine_spec() if te else specs.get_gpt_layer_local_spec()


def model_fields(cfg) -> dict:
    """GPTModel's keyword arguments beyond the shared ones."""
    return {
        "share_embeddings_and_output_weights": TIED_EMBEDDINGS,
        "position_embedding_type": "learned_absolute",
    }
