"""Per-benchmark facts the planner needs, derived from the benchmark's typed config (full size by
default, or the resolved config of the run being priced): shapes, parameter counts
(harness.planner.params), FLOPs per sample, evaluation cadence, the degrees it may search, and
samples to converge (RCPs at full size, data/tiny.yaml or the user's calibration at tiny size).

FLOPs follow the dense-transformer count of Narayanan et al. 2021 ("Efficient large-scale language
model training on GPU clusters", eq. 3) without recomputation: per token, 2 x matmul parameters +
attention 4 x seq x hidden per layer + logits, x 3 with the backward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache

from harness.core.errors import ConfigError, suggest
from harness.planner import params as P
from harness.planner import rcp
from harness.planner.hardware import load_data


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
    cfg: object = field(repr=False, compare=False)
    """The benchmark's typed config the facts come from."""
    size: str
    flops_per_sample: float
    """Training FLOPs per sample (forward + backward)."""
    fwd_flops_per_sample: float
    params: float
    trainable_params: float
    supports: tuple[str, ...] = ()
    layers: int = 0
    hidden: int = 0
    seq: int = 0
    vocab: int = 0
    kv_fraction: float = 1.0
    """K/V width / hidden (grouped-query attention: the CP ring exchanges only K and V)."""
    recompute: dict = field(default_factory=dict)
    fp8_act_factor: float = 1.0
    local_batches: tuple[int, ...] = ()
    act_gib_per_sample: float = 0.0
    mbs_choices: tuple[int, ...] = (1,)
    cp_choices: tuple[int, ...] = (1,)
    nodes_per_seed: int = 0
    """gnn: sampled nodes per seed (1 + fan-out products), each gathering one feature row."""
    sequence_parallel: bool = False
    """The harness's gpt3 with sequence parallelism (TP collectives as all-gather/reduce-scatter)."""
    eval_mbs: int | None = None
    """The harness's evaluation micro-batch where the config sets one (llama2, gnn)."""

    def params_per_stage(self, tp: int, pp: int) -> float:
        """Parameters on the busiest pipeline stage and TP rank (exact for gpt3)."""
        if self.name == "gpt3":
            return max(P.gpt3_stages(self.cfg, tp, pp))
        emb = self.vocab * self.hidden  # embedding on the first stage, lm_head on the last
        return ((self.params - 2 * emb) / pp + emb) / tp

    def samples_to_converge(self, gbs: int, ruleset: str = "4.0.0", tiny: dict | None = None) -> float:
        if self.size == "full":
            return rcp.samples_to_converge(self.name, gbs, ruleset)
        row = (tiny or {}).get(self.name) or tiny_table()[self.name]
        return float(row["samples"])


@cache
def tiny_table() -> dict:
    return load_data("tiny.yaml")


def _gpt3(cfg, size) -> Workload:
    L, h, s, V = cfg.num_layers, cfg.hidden_size, cfg.max_sequence_length, cfg.vocab_size
    f = cfg.ffn_hidden_size
    fwd = s * (2 * L * (4 * h * h + 2 * h * f) + 4 * L * s * h + 2 * V * h)  # ~0.73e15 at full size
    n = P.parameters("gpt3", cfg)["total"]
    return Workload(
        name="gpt3",
        kind="transformer",
        precision="fp8",
        cfg=cfg,
        size=size,
        flops_per_sample=3 * fwd,
        fwd_flops_per_sample=fwd,
        params=n,
        trainable_params=n,
        supports=("tp", "pp", "vp", "cp"),
        layers=L,
        hidden=h,
        seq=s,
        vocab=V,
        recompute={"none": Recompute(34, 0.0), "selective": Recompute(26, 0.05), "full": Recompute(2, 1 / 3)},
        fp8_act_factor=0.8,
        mbs_choices=(1, 2, 4),
        cp_choices=(1, 2),
    )


def _llama2(cfg, size) -> Workload:
    L, h, s = cfg.num_layers, cfg.hidden_size, cfg.max_sequence_length
    n = P.parameters("llama2_70b_lora", cfg)
    # Frozen base: forward 2N + activation gradients 2N per token (no weight gradients).
    # Causal flash attention: 2 s^2 h per layer forward, about 3x that with its backward.
    fwd = 2 * n["base"] * s + 2 * L * s * s * h
    return Workload(
        name="llama2_70b_lora",
        kind="transformer",
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
        recompute={"none": Recompute(24, 0.0), "selective": Recompute(10, 0.2), "full": Recompute(2, 0.5)},
        fp8_act_factor=0.95,
        mbs_choices=(1,),
        cp_choices=(1, 2, 4, 8),
    )


def _gnn(cfg, size) -> Workload:
    # R-GAT: every sampled node is projected in layer 1 (in -> hidden), the inner ones in the
    # later layers; x3 with the backward. The dense part is small: sampling and gathering dominate.
    hops = [1]
    for k in cfg.fan_out:
        hops.append(hops[-1] * k)
    nodes = sum(hops)
    h = cfg.hidden_channels
    fwd = 2 * nodes * cfg.in_channels * h + 2 * sum(hops[:-1]) * h * h + 2 * sum(hops[:-2]) * h * h
    n = P.gnn_count(cfg)
    return Workload(
        name="gnn",
        kind="dp",
        precision="bf16",
        cfg=cfg,
        size=size,
        flops_per_sample=3 * fwd,
        fwd_flops_per_sample=fwd,
        params=n,
        trainable_params=n,
        local_batches=(256, 512, 1024, 2048, 4096),
        act_gib_per_sample=0.002 * (nodes / 916) * (h / 512),
        nodes_per_seed=nodes,
    )


def _sd(cfg, size) -> Workload:
    # SD v2 UNet at 64x64x4 latents: ~0.8 TFLOP forward per image (estimate; the fitted efficiency
    # absorbs the absolute level), scaled by parameters and latent area for other shapes.
    n = P.unet_count(cfg)
    fwd = 0.8e12 * (n / 865_910_724) * (cfg.latent_size / 64) ** 2
    return Workload(
        name="stable_diffusion",
        kind="dp",
        precision="fp16",
        cfg=cfg,
        size=size,
        flops_per_sample=3 * fwd,
        fwd_flops_per_sample=fwd,
        params=n,
        trainable_params=n,
        local_batches=(1, 2, 4, 8, 16, 32, 64, 128),
        act_gib_per_sample=0.75 * (cfg.latent_size / 64) ** 2 * (cfg.unet_block_out_channels[0] / 320),
    )


BUILDERS = {"gpt3": _gpt3, "llama2_70b_lora": _llama2, "gnn": _gnn, "stable_diffusion": _sd}
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


def canonical(name: str) -> str:
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in BUILDERS:
        raise ConfigError(
            f"unknown benchmark '{name}'{suggest(key, BUILDERS)}; the planner knows {', '.join(BUILDERS)}"
        )
    return key


@cache
def _default(name: str) -> Workload:
    return _build(name, P.default_config(name), "full")


def get(name: str, cfg=None, size: str = "full") -> Workload:
    """The workload of `name` at its full reference size, or of a resolved config."""
    key = canonical(name)
    return _default(key) if cfg is None else _build(key, cfg, size)


def _build(key: str, cfg, size: str) -> Workload:
    from dataclasses import replace

    w = BUILDERS[key](cfg, size)
    fields = type(cfg).model_fields  # read once: the time model asks for them per candidate
    return replace(
        w,
        sequence_parallel=bool(getattr(cfg, "sequence_parallel", False))
        if "sequence_parallel" in fields
        else False,
        eval_mbs=getattr(cfg, "eval_micro_batch_size", None) if "eval_micro_batch_size" in fields else None,
    )


def learning_rate(w: Workload, gbs: int) -> float | None:
    """The closed rules tie only gpt3's LR to the batch: 2e-5 up to 3072, 3e-5 from 4096
    (either in between; 2e-5 is the one the RCPs below 4096 use)."""
    if w.name == "gpt3" and w.size == "full":
        return 2.0e-5 if gbs < 4096 else 3.0e-5
    return None


def n_evals(w: Workload, samples: float, gbs: int) -> tuple[float, float]:
    """(number of evaluations, samples per evaluation) during the timed run."""
    c = w.cfg
    if w.name == "gpt3":
        every = math.ceil(c.eval_interval_samples / gbs) * gbs
        per = c.eval_samples / c.max_sequence_length if w.size == "full" else c.eval_samples
        return samples // every, per
    if w.name == "llama2_70b_lora":
        every = math.ceil(c.eval_interval_samples / gbs) * gbs
        skip = math.floor(0.125 * gbs + 2)
        return max(0, samples // every - skip), c.eval_samples
    if w.name == "gnn":
        return samples / c.num_train_seeds * c.evals_per_epoch, c.num_val_seeds
    return 0.0, 0.0  # stable_diffusion: the record implementations score checkpoints offline
