"""The model: transformers `LlamaForCausalLM` with the reference's fused QKV projection + peft LoRA.

The MLPerf reference fine-tunes a Llama-2-70B checkpoint whose attention has one fused
`qkv_proj` (rows = [q; k; v]) and LoRA r 16 / alpha 32 / dropout 0.1 on `qkv_proj` and `o_proj`.
A LoRA on a fused projection is a different parametrisation from LoRA on separate q/k/v (one
shared A matrix for all three), so the attention is rebuilt with a fused projection here; a
checkpoint with split q/k/v weights is fused at load time (checkpoint.py).

Full size: the 70B base is built on the meta device, sharded with FSDP2 (`fully_shard`, one unit
per decoder layer) over all ranks, and each rank reads only its shard from the safetensors files
(checkpoint.py). Activation checkpointing wraps every decoder layer; attention is SDPA
(flash/cuDNN on GPU); FP8 converts the frozen base linears with torchao's float8 training (GPU only).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama import modeling_llama as ml

from harness.core.errors import ConfigError


class FusedQKVAttention(ml.LlamaAttention):
    """LlamaAttention with one `qkv_proj` (out rows [q; k; v]) in place of q_proj/k_proj/v_proj.

    `cp`: None (the default, the path as it always was), or a context_parallel.ContextParallel
    (set by `set_context_parallel`): K and V of this rank's tokens are all-gathered over the CP
    group after RoPE, and `attention_mask` is then the caller's [1, 1, S / CP, S] causal mask."""

    cp = None

    def __init__(self, config: LlamaConfig, layer_idx: int):
        super().__init__(config, layer_idx)
        del self.q_proj, self.k_proj, self.v_proj
        self.q_size = config.num_attention_heads * self.head_dim
        self.kv_size = config.num_key_value_heads * self.head_dim
        self.qkv_proj = nn.Linear(
            config.hidden_size, self.q_size + 2 * self.kv_size, bias=config.attention_bias
        )

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None, **kwargs):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q, k, v = self.qkv_proj(hidden_states).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = q.view(hidden_shape).transpose(1, 2)
        k = k.view(hidden_shape).transpose(1, 2)
        v = v.view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = ml.apply_rotary_pos_emb(q, k, cos, sin)
        if self.cp is not None:  # RoPE first: K carries its tokens' global positions
            k, v = self.cp.gather(k), self.cp.gather(v)
        attn = ml.ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, ml.eager_attention_forward
        )
        out, weights = attn(
            self,
            q,
            k,
            v,
            attention_mask,
            dropout=0.0 if not self.training else self.attention_dropout,
            scaling=self.scaling,
            **kwargs,
        )
        return self.o_proj(out.reshape(*input_shape, -1).contiguous()), weights


def llama_config(cfg) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads,
        max_position_embeddings=cfg.max_sequence_length,
        rms_norm_eps=cfg.rms_norm_eps,
        rope_theta=cfg.rope_theta,
        tie_word_embeddings=False,
        attn_implementation="sdpa",
        use_cache=False,
    )


def build_base(cfg, device: str | torch.device = "cpu", seed: int | None = None) -> LlamaForCausalLM:
    """A randomly initialised fused-QKV Llama (on 'meta' for the full size: no memory used)."""
    if seed is not None:
        torch.manual_seed(seed)
    lc = llama_config(cfg)
    with torch.device(device):
        model = LlamaForCausalLM(lc)
        for i, layer in enumerate(model.model.layers):
            layer.self_attn = FusedQKVAttention(lc, i)
    if str(device) != "meta":
        model.apply(model._init_weights)
    return model


def set_context_parallel(model: nn.Module, cp) -> None:
    """Every attention layer gathers K/V over `cp` (a ContextParallel; None: no CP)."""
    for m in model.modules():
        if isinstance(m, FusedQKVAttention):
            m.cp = cp


# ---- LoRA, precision, sharding ----------------------------------------------------------------
def apply_lora(model: nn.Module, cfg) -> nn.Module:
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(
        r=cfg.lora_rank,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=list(cfg.lora_target_modules),
        bias="none",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


def init_lora_sharded(model: nn.Module, seed: int) -> None:
    """peft's LoRA init (A kaiming-uniform, a = sqrt 5; B zero) after FSDP sharding: each rank
    draws the whole A from `seed` and keeps its shard. (`reset_lora_parameters` on the DTensors
    draws every rank's shard from the same CPU generator state: identical row blocks, an
    effective rank of r / world on CPU.)"""
    import math

    from torch.distributed.tensor import distribute_tensor

    torch.manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if not hasattr(m, "reset_lora_parameters"):
                continue
            for a, b in zip(m.lora_A.values(), m.lora_B.values()):
                full = torch.empty(a.weight.shape, dtype=a.weight.dtype)
                nn.init.kaiming_uniform_(full, a=math.sqrt(5))
                shard = distribute_tensor(full, a.weight.device_mesh, a.weight.placements, src_data_rank=None)
                a.weight.to_local().copy_(shard.to_local())
                b.weight.zero_()


def convert_fp8(model: nn.Module) -> None:
    """FP8 matmuls for the frozen base linears (torchao float8 training; CUDA with SM >= 8.9)."""
    if not torch.cuda.is_available():
        raise ConfigError("fp8=true needs a CUDA GPU (H100/H200); the CPU path runs without it")
    try:
        from torchao.float8 import convert_to_float8_training
    except ImportError:
        raise ConfigError("fp8=true needs torchao on the GPU host (pip install torchao)") from None
    convert_to_float8_training(
        model,
        module_filter_fn=lambda m, fqn: (
            "lm_head" not in fqn and m.in_features % 16 == 0 and m.out_features % 16 == 0
        ),
    )


def enable_activation_checkpointing(model: nn.Module) -> None:
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl,
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )

    apply_activation_checkpointing(
        model,
        checkpoint_wrapper_fn=lambda m: checkpoint_wrapper(m, checkpoint_impl=CheckpointImpl.NO_REENTRANT),
        check_fn=lambda m: isinstance(m, ml.LlamaDecoderLayer),
    )


def shard_fsdp(model: nn.Module, mesh, dtype: torch.dtype) -> None:
    """FSDP2: one unit per decoder layer plus the root; params in `dtype`, grads reduced in fp32."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    for m in model.modules():
        if isinstance(m, ml.LlamaDecoderLayer):
            fully_shard(m, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=True)


def reset_rope(model: nn.Module, device) -> None:
    """Recompute RoPE buffers in fp32 (not in the checkpoint; garbage after a meta-device build,
    rounded by a cast of the whole model to bf16)."""
    for m in model.modules():
        if isinstance(m, ml.LlamaRotaryEmbedding):
            with torch.device("cpu"):
                fresh = ml.LlamaRotaryEmbedding(m.config)
            m.inv_freq = fresh.inv_freq.to(device)
            m.original_inv_freq = fresh.original_inv_freq.to(device)


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]
