"""Per-benchmark facts the planner needs: model size and FLOPs per sample, the RCP unit, evaluation
cadence, the layout degrees it may search, and the closed-division rules tied to the batch size.

Numbers come from ../shared/notes/mlperf-rules.md (model shapes, eval cadence, RCP units) and the
reference implementations; FLOPs follow the usual dense-transformer count (Narayanan et al. 2021,
"Efficient large-scale language model training on GPU clusters", eq. 3) without recomputation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from harness.core.errors import ConfigError, suggest


@dataclass(frozen=True)
class Recompute:
    act_coeff: float
    """Activation bytes kept per token per hidden unit per layer (Korthikanti et al. 2022: 34 for a
    GPT layer with sequence parallelism and fused attention), before dividing by TP."""
    extra_compute: float
    """Extra compute as a fraction of the step's FLOPs (full recompute re-runs the forward)."""


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str
    """'transformer' (TP/PP/VP/CP search) or 'dp' (data parallel + per-accelerator batch only)."""
    precision: str
    """Precision of the bulk of the FLOPs in the record implementations (fp8 / fp16 / bf16)."""
    flops_per_sample: float
    """Training FLOPs per sample (forward + backward) at the reference size."""
    fwd_flops_per_sample: float
    samples_per_unit: float
    """RCP unit -> samples: gpt3 counts tokens (1/2048 sequence), gnn epochs (94,605,581 seeds)."""
    supports: tuple[str, ...] = ()
    # transformer shape (kind == 'transformer')
    layers: int = 0
    hidden: int = 0
    seq: int = 0
    vocab: int = 0
    params: float = 0.0
    """All parameters."""
    trainable_params: float = 0.0
    """Parameters with gradients and optimizer state (LoRA: the adapters only)."""
    recompute: dict = field(default_factory=dict)
    fp8_act_factor: float = 1.0
    """Activation memory with FP8 (linear-layer inputs saved in 8 bits)."""
    # data-parallel workloads (kind == 'dp')
    local_batches: tuple[int, ...] = ()
    act_gib_per_sample: float = 0.0
    # search grids
    mbs_choices: tuple[int, ...] = (1,)
    cp_choices: tuple[int, ...] = (1,)

    def params_per_stage(self, tp: int, pp: int) -> float:
        """Parameters on the busiest pipeline stage (the first, which also holds the embedding)."""
        emb = self.vocab * self.hidden
        return ((self.params - emb) / pp + emb) / tp


def _gpt3() -> Workload:
    L, h, s, V = 96, 12288, 2048, 50257
    flops = 72 * s * L * h * h * (1 + s / (6 * h) + V / (12 * h * L))  # ~2.2e15 per sequence
    return Workload(
        name="gpt3",
        kind="transformer",
        precision="fp8",
        flops_per_sample=flops,
        fwd_flops_per_sample=flops / 3,
        samples_per_unit=1 / s,
        supports=("tp", "pp", "vp", "cp"),
        layers=L,
        hidden=h,
        seq=s,
        vocab=V,
        params=175e9,
        trainable_params=175e9,
        recompute={"none": Recompute(34, 0.0), "selective": Recompute(26, 0.05), "full": Recompute(2, 1 / 3)},
        fp8_act_factor=0.8,
        mbs_choices=(1, 2, 4),
        cp_choices=(1, 2),
    )


def _llama2_70b_lora() -> Workload:
    L, h, s, V = 80, 8192, 8192, 32000
    params = 68.98e9
    # Frozen base: forward 2N + activation gradients 2N per token (no weight gradients).
    # Causal flash attention: 2*s*s*h per layer forward, about 3x that with its backward.
    fwd = 2 * params * s + 2 * L * s * s * h
    flops = 4 * params * s + 6 * L * s * s * h  # ~2.5e15 per 8192-token sample
    lora = L * 16 * (h + (h + 2 * h // 8) + h + h)  # rank 16 on fused qkv and o_proj
    return Workload(
        name="llama2_70b_lora",
        kind="transformer",
        precision="fp8",
        flops_per_sample=flops,
        fwd_flops_per_sample=fwd,
        samples_per_unit=1.0,
        supports=("tp", "pp", "vp", "cp"),
        layers=L,
        hidden=h,
        seq=s,
        vocab=V,
        params=params,
        trainable_params=lora,
        # LoRA keeps no inputs of frozen linears: norms, q/k/v/o for flash attention, SwiGLU gates.
        recompute={"none": Recompute(24, 0.0), "selective": Recompute(10, 0.2), "full": Recompute(2, 0.5)},
        fp8_act_factor=0.95,
        mbs_choices=(1,),
        cp_choices=(1, 2, 4, 8),
    )


def _gnn() -> Workload:
    # R-GAT, 3 layers, hidden 512, 4 heads, fan-out 15,10,5 -> up to 1+15+150+750 = 916 sampled nodes
    # per seed. Layer 1 projects all 916 nodes 1024 -> 512, layer 2 the 166 inner ones 512 -> 512;
    # x3 for the backward. The dense part is small: sampling and feature gathering dominate.
    flops = 3 * (916 * 2 * 1024 * 512 + 166 * 2 * 512 * 512 + 16 * 2 * 512 * 512)
    return Workload(
        name="gnn",
        kind="dp",
        precision="bf16",
        flops_per_sample=flops,
        fwd_flops_per_sample=flops / 3,
        samples_per_unit=94_605_581,
        local_batches=(256, 512, 1024, 2048, 4096),
        act_gib_per_sample=0.002,
        params=25e6,
        trainable_params=25e6,
    )


def _stable_diffusion() -> Workload:
    # SD v2 UNet (865M) at 64x64x4 latents: ~0.8 TFLOP forward per image (estimate; the fitted
    # efficiency absorbs the absolute level). VAE and text encoder run offline.
    fwd = 0.8e12
    return Workload(
        name="stable_diffusion",
        kind="dp",
        precision="fp16",
        flops_per_sample=3 * fwd,
        fwd_flops_per_sample=fwd,
        samples_per_unit=1.0,
        local_batches=(1, 2, 4, 8, 16, 32, 64, 128),
        act_gib_per_sample=0.75,
        params=865e6,
        trainable_params=865e6,
    )


WORKLOADS = {w.name: w for w in (_gpt3(), _llama2_70b_lora(), _gnn(), _stable_diffusion())}
ALIASES = {
    "gpt-3": "gpt3",
    "gpt3-175b": "gpt3",
    "llama2-lora": "llama2_70b_lora",
    "llama2": "llama2_70b_lora",
    "lora": "llama2_70b_lora",
    "rgat": "gnn",
    "r-gat": "gnn",
    "sd": "stable_diffusion",
}

# gnn: the IGBH-full feature store (547M nodes x 1024 features, FP8 offline) and CSC graph.
GNN_FEATURE_GIB = 547e6 * 1024 / 2**30
GNN_GRAPH_GIB = 5.8e9 * 4 / 2**30
GNN_BYTES_PER_SEED = 916 * 1024


def get(name: str) -> Workload:
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in WORKLOADS:
        raise ConfigError(
            f"unknown benchmark '{name}'{suggest(key, WORKLOADS)}; the planner knows {', '.join(WORKLOADS)}"
        )
    return WORKLOADS[key]


def learning_rate(w: Workload, gbs: int) -> float | None:
    """The closed rules tie only gpt3's LR to the batch: 2e-5 up to 3072, 3e-5 from 4096
    (either in between; 2e-5 is the one the RCPs below 4096 use)."""
    if w.name == "gpt3":
        return 2.0e-5 if gbs < 4096 else 3.0e-5
    return None


def n_evals(w: Workload, samples: float, gbs: int) -> tuple[float, float]:
    """(number of evaluations, samples per evaluation) during the timed run."""
    if w.name == "gpt3":
        every = math.ceil(24576 / gbs) * gbs
        return samples // every, 11_590_004 / 2048
    if w.name == "llama2_70b_lora":
        skip = math.floor(0.125 * gbs + 2)
        return max(0, samples // 384 - skip), 173
    if w.name == "gnn":
        return samples / 94_605_581 * 20, 788_379
    return 0.0, 0.0  # stable_diffusion: evaluation is offline and untimed
