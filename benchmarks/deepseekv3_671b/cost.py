"""DeepSeek-V3's cost model: megatron-core GPTModel with multi-latent attention and the MoE layer
(benchmarks/moe_cost.py), as megatron-core 0.19.2 builds it (h 7168, 128 heads).

MLA per layer: q down h x 1536 (11,010,048) + q norm 1,536 + q up 1536 x 128 x (128 + 64)
(37,748,736) + kv down h x (512 + 64) (4,128,768) + kv norm 512 + kv up 512 x 128 x (128 + 128)
(16,777,216) + projection 128 x 128 x h (117,440,512) + input norm 7,168 = 187,114,496.
Dense layer (3): + SwiGLU 3 x h x 18432 (396,361,728) + pre-MLP norm = 583,483,392.
MoE layer (58): + 256 experts x 3 x h x 2048 (11,274,289,152) + the shared expert 3 x h x 2048
(44,040,192) + router 256 x h (1,835,008; the expert bias is a buffer) + norm = 11,507,286,016.
Untied embeddings 2 x 129,280 x h (1,853,358,080) + final norm 7,168. Without MTP:
    3 x 583,483,392 + 58 x 11,507,286,016 + 1,853,358,080 + 7,168 = 671,026,404,352
MTP (1 layer, on the last stage, sharing the embeddings): 2 norms + the 2h -> h projection + one
MoE layer + its norm (megatron's MultiTokenPredictionLayer; not measured here).
Active per token (8 of the 256 experts, the input embedding a lookup left out): 36,625,603,584
without MTP (DeepSeek's "37 B").
"""

from __future__ import annotations

import math

from benchmarks.costs import Workload
from benchmarks.moe_cost import MoeCost


class DeepseekV3Cost(MoeCost):
    MBS_CHOICES = (1,)
    CP_CHOICES = (1,)

    def evals(self, w: Workload, samples: float, gbs: int) -> tuple[float, float]:
        # 6.1.0: the first at GBS x floor(42 + 24576 / GBS), then every eval interval
        first = gbs * math.floor(42 + 24576 / gbs)
        every = math.ceil(w.cfg.eval_interval_samples / gbs) * gbs
        return (1 + (samples - first) // every if samples >= first else 0), w.cfg.eval_samples

    def samples_per_rcp_unit(self, gbs: int, ruleset: str) -> float:
        return 1.0  # the RCPs count sequences

    def learning_rate(self, w: Workload, gbs: int) -> float | None:
        # the closed rule binds the LR to the GBS; the config derives it from the same formula
        return 2.4e-5 * math.sqrt(gbs / 16384) if w.size == "full" else None


COST = DeepseekV3Cost()
