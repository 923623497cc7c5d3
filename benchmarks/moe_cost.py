"""The Megatron-GPT family's mixture-of-experts cost model (gpt_oss_20b, deepseekv3_671b): parameters
counted as megatron-core 0.19.2 builds GPTModel with its MoE layer (benchmarks/<name>/cost.py show
the sums), total and active; bytes per rank as the family shards them (benchmarks/gpt3/cost.py:
bf16 weights, fp32 grad buffer, fp32 master + Adam over the distributed optimizer's group).

Split per rank, with expert TP 1 (every expert whole on one rank):
    dense part   attention, dense MLPs, the shared expert: over TP (column/row parallel; norms, the
                 router and MLA's down-projections replicated), layers over PP, optimizer over DP x CP
    experts      the routed experts: E / EP on each rank, layers over PP, not over TP; optimizer over
                 the expert data-parallel group, TP x CP x DP / EP ranks
    embeddings   input on the first stage, untied output layer (+ final norm, + MTP) on the last
FLOPs per token: 2 x active matmul parameters (the routed experts' top-k share), + attention scores
and values (windowed layers see `window_size` keys), + the logits.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from benchmarks.costs import ADAM, BF16, FP32, Moe, Recompute, Workload, degrees
from benchmarks.gpt3.cost import Gpt3Cost
from benchmarks.moe_params import experts, split


class MoeCost(Gpt3Cost):
    """`cfg` throughout: a MegatronMoeConfig, or the planner's overlay of one (hence Any)."""

    RECOMPUTE = {"none": Recompute(38, 0.0), "selective": Recompute(30, 0.05), "full": Recompute(2, 1 / 3)}
    MBS_CHOICES = (1, 2)
    CP_CHOICES = (1, 2, 4)

    def split(self, cfg: Any, tp: int = 1, pp: int = 1, ep: int = 1) -> list[tuple[int, int]]:
        return split(cfg, tp, pp, ep)

    def stages(self, cfg: Any, tp: int = 1, pp: int = 1) -> list[int]:
        return [d + e for d, e in self.split(cfg, tp, pp)]

    def parameters(self, cfg: Any) -> dict[str, int]:
        n = sum(self.stages(cfg))
        return {"total": n, "trainable": n, "active": self.active(cfg)}

    @staticmethod
    def routed(cfg: Any) -> int:
        """The routed experts' parameters over every MoE layer (MTP's included)."""
        return experts(cfg) * (cfg.moe_layers() + cfg.mtp_num_layers)

    def active(self, cfg: Any) -> int:
        """Parameters one token's matmuls use: all but the routed experts it is not sent to and the
        input embedding (a lookup), as the published "active" counts are made (gpt-oss-20b 3.6 B at
        V 201,088, DeepSeek-V3 37 B)."""
        routed = self.routed(cfg)
        kept = routed * cfg.moe_router_topk // cfg.num_moe_experts
        return sum(self.stages(cfg)) - routed + kept - cfg.vocab_size * cfg.hidden_size

    def rank_bytes(self, cfg: Any, layout: Any, device: str = "cuda") -> dict[str, float]:
        lay = degrees(layout)
        tp, cp, dp, ep = lay["tp"], lay["cp"], lay["dp"], lay["ep"]
        dense, exp = max(self.split(cfg, tp, lay["pp"], ep), key=sum)
        half = device != "cpu" and cfg.precision == "bf16"
        opt = (FP32 if half else 0) + ADAM  # master copy (bf16 weights only) + Adam m, v
        # distributed optimizer: dense state over DP x CP, expert state over the expert-DP group
        shard, eshard = (dp * cp, tp * cp * dp // ep) if cfg.distributed_optimizer else (1, 1)
        n = dense + exp
        return {
            "parameters_rank": n,
            "weights": n * (BF16 if half else FP32),
            "gradients": n * FP32,
            "optimizer": dense * opt / shard + exp * opt / max(1, eshard),
        }

    def fwd_flops(self, cfg: Any) -> float:
        s, heads = cfg.max_sequence_length, cfg.num_attention_heads
        matmul = 2 * self.active(cfg)  # includes the logits' 2 V h
        if cfg.multi_latent_attention:
            width = heads * (cfg.qk_head_dim + cfg.qk_pos_emb_head_dim + cfg.v_head_dim)
            attn = 2 * s * width * cfg.num_layers
        else:
            width = 4 * heads * cfg.head_dim  # scores + values, causal-agnostic
            windowed = cfg.num_layers - cfg.num_layers // cfg.window_attn_skip_freq if cfg.window_size else 0
            seen = min(cfg.window_size, s) if cfg.window_size else s
            attn = width * (windowed * seen + (cfg.num_layers - windowed) * s)
        return s * (matmul + attn)

    def kv_fraction(self, cfg: Any) -> float:
        return 1.0 if cfg.multi_latent_attention else cfg.num_query_groups / cfg.num_attention_heads

    def workload(self, cfg: Any, size: str) -> Workload:
        w = super().workload(cfg, size)
        routed = self.routed(cfg)
        e = cfg.num_moe_experts
        active = self.active(cfg)
        eps = tuple(d for d in (1, 2, 4, 8, 16, 32, 64, 128, 256) if e % d == 0)
        share = routed * cfg.moe_router_topk / e / active
        moe = Moe(e, cfg.moe_router_topk, cfg.moe_layers(), routed, active, eps, share)
        # layers: what PP x VP split (the pipeline units: DeepSeek-V3's 64 = 61 + embedding, MTP, loss)
        return replace(
            w, supports=("tp", "pp", "vp", "cp", "ep"), moe=moe, precision="fp8", layers=cfg.pipeline_layers
        )

    def params_per_stage(self, w: Workload, tp: int, pp: int) -> float:
        """The dense part on the busiest stage's TP rank: routed experts are counted by `Moe`."""
        return max(d for d, _ in self.split(w.cfg, tp, pp))
