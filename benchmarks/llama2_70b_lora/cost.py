"""Llama 2 70B LoRA's cost model: transformers Llama (fused qkv_proj, untied lm_head) + peft LoRA
on `lora_target_modules`, as reference_impls/llama2_70b_lora builds and shards it.

Frozen base in `precision` (bf16), adapters fp32; with FSDP2 (`fsdp`, world > 1) every tensor is
split over all DP x CP ranks (dim 0: `fsdp_rank0`), gradients (fp32, adapters only) and AdamW m, v
too; plus the current and the prefetched decoder layer gathered in bf16 (`fsdp_gathered`).
"""

from __future__ import annotations

import math
from typing import Any

from benchmarks.costs import ADAM, BF16, FP32, Cost, Recompute, Workload, degrees, fsdp_rank0
from benchmarks.llama2_70b_lora.config import Llama2LoraConfig


def _layer(cfg: Llama2LoraConfig) -> list[tuple[int, int, bool]]:
    """(dim 0, elements per dim-0 row, trainable) of every tensor of one decoder layer."""
    h, f = cfg.hidden_size, cfg.intermediate_size
    kv = cfg.num_key_value_heads * (h // cfg.num_attention_heads)
    linears = {"qkv_proj": (h + 2 * kv, h), "o_proj": (h, h), "gate_proj": (f, h), "up_proj": (f, h)}
    linears["down_proj"] = (h, f)  # (out, in): nn.Linear keeps weight as [out, in]
    r = cfg.lora_rank
    layer = [(o, i, False) for o, i in linears.values()] + [(h, 1, False)] * 2  # + two RMSNorms
    for name, (o, i) in linears.items():
        if name in cfg.lora_target_modules:  # peft: lora_A [r, in], lora_B [out, r]
            layer += [(r, i, True), (o, r, True)]
    return layer


def tensors(cfg: Llama2LoraConfig) -> list[tuple[int, int, bool]]:
    """Every tensor of the model: embed_tokens, the decoder layers, the final norm, lm_head (untied)."""
    v, h = cfg.vocab_size, cfg.hidden_size
    return [(v, h, False)] + _layer(cfg) * cfg.num_layers + [(h, 1, False), (v, h, False)]


def counts(cfg: Llama2LoraConfig) -> dict[str, int]:
    """Parameters: the frozen base, the LoRA adapters, and one decoder layer's base (FSDP gathers it)."""
    all_ = tensors(cfg)
    base = sum(d0 * rest for d0, rest, trainable in all_ if not trainable)
    lora = sum(d0 * rest for d0, rest, trainable in all_ if trainable)
    layer = sum(d0 * rest for d0, rest, trainable in _layer(cfg) if not trainable)
    return {"base": base, "lora": lora, "layer": layer}


class Llama2LoraCost(Cost):
    def parameters(self, cfg: Llama2LoraConfig) -> dict[str, int]:
        c = counts(cfg)
        return {"total": c["base"] + c["lora"], "trainable": c["lora"], "base": c["base"]}

    def rank_bytes(self, cfg: Llama2LoraConfig, layout: Any, device: str = "cuda") -> dict[str, float]:
        lay = degrees(layout)
        world = lay["dp"] * lay["cp"]
        shard = world if (cfg.fsdp and world > 1) else 1
        base_b = BF16 if cfg.precision == "bf16" else FP32
        base, lora = fsdp_rank0(tensors(cfg), shard)
        out: dict[str, float] = {
            "parameters_rank": base + lora,
            "weights": base * base_b + lora * FP32,
            "gradients": lora * FP32,
            "optimizer": lora * ADAM,
        }
        if shard > 1:  # FSDP2: the running layer and the prefetched next one, unsharded
            out["fsdp_gathered"] = 2 * counts(cfg)["layer"] * base_b
        return out

    def workload(self, cfg: Llama2LoraConfig, size: str) -> Workload:
        L, h, s = cfg.num_layers, cfg.hidden_size, cfg.max_sequence_length
        n = self.parameters(cfg)
        # Frozen base: forward 2N + activation gradients 2N per token (no weight gradients).
        # Causal flash attention: 2 s^2 h per layer forward, about 3x that with its backward.
        fwd = 2 * n["base"] * s + 2 * L * s * s * h
        return Workload(
            kind="model_parallel",
            precision="fp8",
            cfg=cfg,
            size=size,
            flops_per_sample=4 * n["base"] * s + 6 * L * s * s * h,
            fwd_flops_per_sample=fwd,
            params=n["total"],
            trainable_params=n["trainable"],
            supports=("tp", "pp", "vp", "cp"),
            layers=L,
            hidden=h,
            seq=s,
            vocab=cfg.vocab_size,
            kv_fraction=cfg.num_key_value_heads / cfg.num_attention_heads,
            # LoRA keeps no inputs of frozen linears: norms, q/k/v/o for flash attention, SwiGLU gates.
            recompute={
                "none": Recompute(24, 0.0),
                "selective": Recompute(10, 0.2),
                "full": Recompute(2, 0.5),
            },
            fp8_act_factor=0.95,
            mbs_choices=(1,),
            cp_choices=(1, 2, 4, 8),
        )

    def evals(self, w: Workload, samples: float, gbs: int) -> tuple[float, float]:
        c = w.cfg
        every = math.ceil(c.eval_interval_samples / gbs) * gbs
        skip = math.floor(0.125 * gbs + 2)  # the rules skip the first floor(0.125 x GBS + 2) evals
        return max(0, samples // every - skip), c.eval_samples

    def harness_overrides(self, w: Workload, c: Any) -> dict[str, Any]:
        return {"fsdp": c.fsdp}  # the candidate's sharding, not the config's default


COST = Llama2LoraCost()
