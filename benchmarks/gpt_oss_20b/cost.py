"""gpt-oss-20b's cost model: megatron-core GPTModel with the MoE layer (benchmarks/moe_cost.py), as
megatron-core 0.19.2 builds it, every layer MoE.

Per layer (h 2880, 64 query heads and 8 KV heads of width 64 -> q 4,096, kv 512 each):
    QKV h x (4096 + 2 x 512)             14,745,600
    projection 4096 x h                  11,796,480
    router 32 x h                            92,160
    32 experts x SwiGLU 3 x h x 2880    796,262,400
    input and pre-MLP RMSNorms                5,760      = 822,902,400 per layer
Untied embeddings 2 x V x h and the final norm h. The reference's variant (no biases, no sinks):
    V 128,256: 24 x 822,902,400 + 2 x 128,256 x 2880 + 2880 = 20,488,415,040 (20.5 B; 0.06 % under)
The original gpt-oss (NVIDIA's variant: add_bias_linear, attention_sinks) adds per layer the QKV
bias 5,120, the projection bias 2,880, the experts' biases 32 x (2 x 2880 + 2880) = 276,480, the
router bias 32 and one sink per head 64 (= 284,576):
    V 201,088: 24 x 823,186,976 + 2 x 201,088 x 2880 + 2880 = 20,914,757,184 (the meta-device count)
Active per token (what FLOPs count: 4 of the 32 experts, the input embedding a lookup left out):
3,397,527,360 at V 128,256 (the notes' 3.4 B); 3.6 B for the original at V 201,088.
"""

from __future__ import annotations

import math

from benchmarks.costs import Workload
from benchmarks.moe_cost import MoeCost

LEARNING_RATES = {16: 4.0e-4, 32: 8.0e-4, 64: 1.0e-3}
"""The RCPs' base LR per GBS (rcps_gpt_oss_20b.json, 6.0.0-6.1.0): the nearest at or below."""


class GptOssCost(MoeCost):
    def evals(self, w: Workload, samples: float, gbs: int) -> tuple[float, float]:
        every = math.ceil(w.cfg.eval_interval_samples / gbs) * gbs
        return samples // every, w.cfg.eval_samples

    def samples_per_rcp_unit(self, gbs: int, ruleset: str) -> float:
        return 1.0  # the RCPs count sequences

    def learning_rate(self, w: Workload, gbs: int) -> float | None:
        if w.size != "full":
            return None
        below = [g for g in LEARNING_RATES if g <= gbs]
        return LEARNING_RATES[max(below)] if below else LEARNING_RATES[min(LEARNING_RATES)]


COST = GptOssCost()
