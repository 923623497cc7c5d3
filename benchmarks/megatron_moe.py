"""The Megatron-GPT family's mixture-of-experts fields (gpt_oss_20b, deepseekv3_671b): megatron-core's
MoE layer (router, experts, shared expert), its attention variants (GQA with a sliding window and
sinks, or multi-latent attention) and expert parallelism, on top of `AdamwPretrainConfig` (the family's config with the C4 rules' AdamW). Names follow
megatron-core's TransformerConfig / MLATransformerConfig, so `--set` speaks its vocabulary.

Expert parallelism (EP) splits the routed experts over EP ranks carved out of TP x CP x DP (the
attention ranks): EP must divide TP x CP x DP / expert TP, with expert TP = 1 here (every expert
whole on one rank: reference_impls/megatron_gpt/model.py expert_parallel sets megatron's
expert_tensor_parallel_size to 1).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from benchmarks.base import Switch
from benchmarks.megatron_gpt import AdamwPretrainConfig


class MegatronMoeConfig(AdamwPretrainConfig):
    # ---- attention ----------------------------------------------------------------------------
    num_query_groups: int = Field(1, ge=1)
    """Key/value heads of grouped-query attention (unused with multi_latent_attention)."""
    kv_channels: int | None = Field(None, ge=1)
    """Head width; None = hidden_size / num_attention_heads (gpt-oss sets 64: 64 x 64 != 2880)."""
    rotary_base: int = Field(10000, ge=1)
    """RoPE base frequency theta."""
    window_size: int = Field(0, ge=0)
    """Sliding-window attention: tokens each query sees on the windowed layers; 0 = full attention."""
    window_attn_skip_freq: int = Field(1, ge=1)
    """With a window: every N-th layer attends fully (2 = windowed and full layers alternate)."""
    attention_sinks: bool = False
    """A learned softmax offset per head (megatron softmax_type 'learnable'; gpt-oss's original sinks):
    num_attention_heads parameters per layer."""
    add_bias_linear: bool = False
    """Biases on every linear layer (QKV, projection, experts' fc1/fc2, router): gpt-oss's original."""
    multi_latent_attention: bool = False
    """DeepSeek's multi-latent attention (megatron MLASelfAttention) instead of GQA."""
    q_lora_rank: int = Field(0, ge=0)
    """MLA: width of the compressed query (down- then up-projection); 0 = a plain query projection."""
    kv_lora_rank: int = Field(0, ge=0)
    """MLA: width of the compressed key/value latent."""
    qk_head_dim: int = Field(0, ge=0)
    """MLA: per-head query/key width without the rotary part."""
    qk_pos_emb_head_dim: int = Field(0, ge=0)
    """MLA: per-head rotary query/key width (the key's rotary part is shared by all heads)."""
    v_head_dim: int = Field(0, ge=0)
    """MLA: per-head value width."""

    # ---- mixture of experts -------------------------------------------------------------------
    num_moe_experts: int = Field(ge=1)
    """Routed experts per MoE layer."""
    moe_router_topk: int = Field(ge=1)
    """Routed experts each token goes to."""
    moe_ffn_hidden_size: int = Field(ge=1)
    """Each routed expert's SwiGLU width (each of its gate and up projections)."""
    moe_router_score_function: Literal["softmax", "sigmoid"] = "softmax"
    """Router scores: softmax over experts (gpt-oss) or per-expert sigmoid (DeepSeek-V3)."""
    moe_router_enable_expert_bias: bool = False
    """DeepSeek's aux-loss-free balancing: a per-expert bias added for the top-k choice only, updated
    from the load (a buffer, not a parameter)."""
    moe_router_num_groups: int = Field(0, ge=0)
    """Group-limited routing: experts in this many groups (0 = none)."""
    moe_router_group_topk: int = Field(0, ge=0)
    """Group-limited routing: each token's experts come from this many top groups."""
    moe_shared_expert_intermediate_size: int = Field(0, ge=0)
    """SwiGLU width of the shared expert every token also goes through; 0 = none."""
    moe_first_dense_layers: int = Field(0, ge=0)
    """The first N layers are dense (megatron moe_layer_freq = [0] x N + [1] x (layers - N))."""
    moe_aux_loss_coeff: float = Field(0.0, ge=0.0)
    """Load-balancing auxiliary loss coefficient (0 = none)."""
    mtp_num_layers: int = Field(0, ge=0)
    """Multi-token-prediction layers after the main model (DeepSeek-V3: 1); 0 = none."""
    moe_token_dispatcher_type: Literal["alltoall", "allgather"] = "alltoall"
    """How tokens reach their experts' EP ranks (megatron's dispatchers): all-to-all (the
    references') or all-gather; both run on a CPU under gloo (cpu_compat patches all-to-all)."""
    moe_flex_dispatcher: bool = False
    """megatron's 'flex' dispatcher instead (DeepEP's fused dispatch and combine kernels): GPU only."""
    moe_grouped_gemm: bool = False
    """All of a rank's experts in one grouped GEMM (GPU kernels), else one GEMM per expert."""
    expert_model_parallel_size: int = Field(1, ge=1)
    """EP degree: the routed experts split over this many ranks (must divide TP x CP x DP)."""
    pipeline_split_counts_embedding_and_loss: bool = False
    """Pipeline stages balance the embedding, each MTP layer and the loss as one layer each
    (1 + 61 + 1 + 1 = 64 units in equal chunks over PP x VP, passed as megatron's
    pipeline_model_parallel_layout: PP 4 puts the embedding + 15 layers, 16, 16, 14 layers + MTP +
    loss; Megatron-Bridge's DeepSeek-V3 map puts 16, 16, 16, 13); False: the layers split evenly."""

    SWITCHES: ClassVar[dict[str, Switch]] = {
        **AdamwPretrainConfig.SWITCHES,
        # On a CPU megatron's local spec builds one MLP per expert whatever the flag (seen: the
        # tiny model with it on trained through SequentialMLP): the grouped GEMM is TE's GroupedMLP.
        "moe_grouped_gemm": Switch(
            ("gpu",),
            "the grouped expert GEMM is Transformer Engine's (the local spec ignores it)",
            library="transformer_engine",
        ),
        "moe_flex_dispatcher": Switch(
            ("gpu",), "DeepEP's fused dispatch/combine kernels need CUDA", library="deep_ep"
        ),
    }
    SUPPORTS: ClassVar[tuple[str, ...]] = ("tp", "pp", "vp", "ep")

    @property
    def head_dim(self) -> int:
        return self.kv_channels or self.hidden_size // self.num_attention_heads

    def pipeline_units(self) -> list[int | str]:
        """What PP x VP split evenly: layer indices, with 'embedding', 'mtp' and 'loss' units when
        pipeline_split_counts_embedding_and_loss."""
        layers: list[int | str] = list(range(self.num_layers))
        if not self.pipeline_split_counts_embedding_and_loss:
            return layers
        return ["embedding", *layers, *(["mtp"] * self.mtp_num_layers), "loss"]

    @property
    def pipeline_layers(self) -> int:
        """The count PP x VP must divide (harness/resolve/runplans.py passes it to layout.derive)."""
        return len(self.pipeline_units())

    def moe_layers(self) -> int:
        """Layers with a MoE block (the rest are dense)."""
        return self.num_layers - self.moe_first_dense_layers

    def _check_moe(self) -> None:
        if self.kv_channels is None and not self.multi_latent_attention:
            self._check_shape()
        if not self.multi_latent_attention and self.num_attention_heads % self.num_query_groups:
            raise ValueError(
                f"num_attention_heads {self.num_attention_heads} is not a multiple of "
                f"num_query_groups {self.num_query_groups}"
            )
        if self.moe_router_topk > self.num_moe_experts:
            raise ValueError(
                f"moe_router_topk {self.moe_router_topk} exceeds num_moe_experts {self.num_moe_experts}"
            )
        if self.num_moe_experts % self.expert_model_parallel_size:
            raise ValueError(
                f"expert_model_parallel_size {self.expert_model_parallel_size} does not divide "
                f"num_moe_experts {self.num_moe_experts}"
            )
        if self.tensor_model_parallel_size > 1 and not self.sequence_parallel:
            # megatron-core's MoELayer raises at the first training step otherwise
            raise ValueError(
                "a mixture of experts at tensor_model_parallel_size > 1 needs sequence_parallel=true"
            )
        if self.moe_first_dense_layers > self.num_layers:
            raise ValueError(f"moe_first_dense_layers {self.moe_first_dense_layers} exceeds num_layers")
        g, top = self.moe_router_num_groups, self.moe_router_group_topk
        if g and (self.num_moe_experts % g or not 0 < top <= g):
            raise ValueError(
                f"group-limited routing: {g} groups must divide {self.num_moe_experts} experts and "
                f"moe_router_group_topk {top} lie in 1..{g}"
            )
