"""What the planner may ask a benchmark (`CostModel`), what it answers with (`Workload`), and the
formulas several benchmarks share, written once here.

Each benchmarks/<name>/cost.py holds one cost model, a `Cost` subclass (its defaults are what a
benchmark without the feature answers), set as `cost=` of that benchmark's `BENCHMARK`. The planner
(harness/planner/) asks only these and never names a benchmark. Torch-free: everything is counted
from the typed config. Arguments, throughout: `cfg` the typed config, `w` the Workload made from it,
`c` a candidate layout (harness.planner.memory.Candidate), `hw` a harness.planner.hardware.Hardware,
`k` the constants of one prediction (harness/planner/data/efficiency.yaml, flat).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

BF16, FP32 = 2, 4
ADAM = 2 * FP32  # Adam / AdamW: the moments m and v, fp32, per trainable element
GIB = 2**30


@dataclass(frozen=True)
class Recompute:
    act_coeff: float
    """Activation bytes kept per token per hidden unit per layer (Korthikanti et al. 2022: 34 for a
    GPT layer with sequence parallelism and fused attention), before dividing by TP."""
    extra_compute: float
    """Extra compute as a fraction of the step's FLOPs (full recompute re-runs the forward)."""


@dataclass(frozen=True)
class Workload:
    """The facts of one benchmark's model the planner's search, memory and time model use."""

    kind: str
    """'model_parallel' (layers split: TP/PP/VP/CP search) or 'dp' (data parallel + per-accelerator
    batch only)."""
    precision: str
    """Precision of the bulk of the FLOPs in the record implementations (fp8 / fp16 / bf16)."""
    cfg: Any = field(repr=False, compare=False)
    """The benchmark's typed config the facts come from."""
    size: str
    """'full' or 'tiny': which samples-to-converge apply (RCPs or the tiny calibration)."""
    flops_per_sample: float
    """Training FLOPs per sample (forward + backward)."""
    fwd_flops_per_sample: float
    """Forward FLOPs per sample (what an evaluation costs)."""
    params: float
    """All parameters of the model."""
    trainable_params: float
    """Those with gradients and optimizer state (fewer than `params` for adapters)."""
    supports: tuple[str, ...] = ()
    """Parallel degrees the record implementations search ('tp', 'pp', 'vp', 'cp')."""
    layers: int = 0
    """Transformer layers (0 for 'dp' workloads)."""
    hidden: int = 0
    """Hidden width."""
    seq: int = 0
    """Tokens per sample."""
    vocab: int = 0
    """Vocabulary rows (the logits' width)."""
    kv_fraction: float = 1.0
    """K/V width / hidden (grouped-query attention: the CP ring exchanges only K and V)."""
    recompute: dict[str, Recompute] = field(default_factory=dict)
    """Activation recompute modes the implementations offer ('none', 'selective', 'full')."""
    fp8_act_factor: float = 1.0
    """Activation bytes with FP8 / without (FP8 stores the linear layers' inputs in 8 bits)."""
    local_batches: tuple[int, ...] = ()
    """Per-accelerator batches the 'dp' search tries beside the powers of two."""
    act_gib_per_sample: float = 0.0
    """'dp' workloads: activation GiB per sample on one accelerator."""
    mbs_choices: tuple[int, ...] = (1,)
    """Micro-batch sizes the 'model_parallel' search tries."""
    cp_choices: tuple[int, ...] = (1,)
    """Context-parallel sizes the 'model_parallel' search tries."""
    moe: Moe | None = None
    """Mixture-of-experts facts (None: a dense model)."""
    sequence_parallel: bool = False
    """The harness's config runs TP with sequence parallelism (collectives as all-gather /
    reduce-scatter); set by the planner from the config's `sequence_parallel`."""
    eval_mbs: int | None = None
    """The harness's evaluation micro-batch where the config sets one (`eval_micro_batch_size`)."""
    bench: Any = field(default=None, repr=False, compare=False)
    """The benchmarks.benchmark.Benchmark this is a workload of (set by harness.planner.workloads.get;
    not imported here: benchmark.py imports this module)."""

    @classmethod
    def fully_trained(cls, fwd: float, params: float, **facts: Any) -> Workload:
        """A model all of whose parameters train: training FLOPs = 3 x forward (the backward
        computes gradients of both activations and weights, 2 x forward)."""
        return cls(
            flops_per_sample=3 * fwd,
            fwd_flops_per_sample=fwd,
            params=params,
            trainable_params=params,
            **facts,
        )

    @property
    def name(self) -> str:
        """The benchmark's name: the key of its constants and published rows in the planner's data."""
        assert self.bench is not None, "a Workload is made by harness.planner.workloads.get"
        return self.bench.name

    @property
    def cost(self) -> CostModel:
        """The cost model that made this workload."""
        assert self.bench is not None and self.bench.cost is not None
        return self.bench.cost

    def params_per_stage(self, tp: int, pp: int) -> float:
        """Parameters on the busiest pipeline stage and TP rank."""
        return self.cost.params_per_stage(self, tp, pp)


@dataclass(frozen=True)
class Moe:
    """What the planner needs of a mixture-of-experts model beyond a dense one's facts."""

    experts: int
    """Routed experts per MoE layer."""
    topk: int
    """Routed experts each token goes to."""
    moe_layers: int
    """Layers with a MoE block."""
    expert_params: float
    """All routed experts' parameters (the part split over EP, whole on each rank: expert TP 1)."""
    active_params: float
    """Parameters one token passes through (FLOPs come from these)."""
    ep_choices: tuple[int, ...] = (1,)
    """EP degrees the 'model_parallel' search tries (divisors of `experts`)."""
    expert_share: float = 0.0
    """Share of the matmul FLOPs in the routed experts (they run at their own GEMM efficiency)."""

    def expert_rows(self, tokens: float, ep: int) -> float:
        """Rows of one local expert's GEMM per microbatch: the rank's tokens x top-k spread over
        the experts, EP ranks' tokens meeting on each rank's E / EP experts."""
        return tokens * self.topk * ep / self.experts

    def expert_params_rank(self, pp: int, ep: int) -> float:
        """Routed-expert parameters on one rank of the busiest stage (MoE layers split evenly over PP)."""
        return self.expert_params / pp / ep

    def a2a_bytes(self, tokens: float, hidden: int, layers: float, ep: int, elem: int = 2) -> float:
        """Bytes one rank sends in the all-to-alls of one microbatch through `layers` MoE layers:
        each of its `tokens` goes to topk experts and comes back (dispatch + combine) in forward
        and again in backward (4 exchanges), the (EP-1)/EP of it leaving the rank."""
        return 4 * layers * tokens * self.topk * hidden * elem * (ep - 1) / ep


# ---- shared formulas ------------------------------------------------------------------------------
def degrees(layout: Any) -> dict[str, int]:
    """tp/pp/vp/cp/dp/ep of anything with them (a harness Layout, a dict, None); a missing one is 1."""
    keys = ("tp", "pp", "vp", "cp", "dp", "ep")
    if layout is None:
        return dict.fromkeys(keys, 1)
    get = layout.get if isinstance(layout, Mapping) else lambda k, d=1: getattr(layout, k, d)
    return {k: int(get(k, 1) or 1) for k in keys}


def dense_transformer_fwd_flops(layers: int, hidden: int, ffn: int, seq: int, vocab: int) -> int:
    """Forward FLOPs of one sequence through a dense GPT (Narayanan et al. 2021, "Efficient
    large-scale language model training on GPU clusters", eq. 3, without recomputation): per
    token 2 x the matmul parameters, attention 4 x seq x hidden per layer, and the logits."""
    L, h, f, s, V = layers, hidden, ffn, seq, vocab
    return s * (2 * L * (4 * h * h + 2 * h * f) + 4 * L * s * h + 2 * V * h)


def zero_busiest(sizes: Iterable[int], world: int) -> int:
    """Elements on the busiest rank under ZeroRedundancyOptimizer: whole tensors, largest first,
    each to the rank holding the fewest so far (torch's `_partition_parameters`)."""
    ranks = [0] * world
    for n in sorted(sizes, reverse=True):
        ranks[ranks.index(min(ranks))] += n
    return max(ranks)


def fsdp_rank0(tensors: Iterable[tuple[int, int, bool]], world: int) -> tuple[int, int]:
    """(frozen, trainable) elements on rank 0 under FSDP2 over `world` ranks. `tensors`: (dim 0,
    elements per dim-0 row, trainable). FSDP2 splits every tensor on dim 0 in chunks of
    ceil(dim0 / world), so rank 0 holds the largest share (a whole row even when dim 0 < world)."""
    frozen = trainable = 0
    for d0, rest, t in tensors:
        held = -(-d0 // world) * rest
        if t:
            trainable += held
        else:
            frozen += held
    return frozen, trainable


def replicated_adam_bytes(n: int, optimizer_elements: int | None = None) -> dict[str, float]:
    """fp32 weights and gradients replicated on every rank (DDP), Adam's m and v over
    `optimizer_elements` (default all n; fewer where an optimizer shards them, e.g. ZeRO)."""
    held = n if optimizer_elements is None else optimizer_elements
    return {"parameters_rank": n, "weights": n * FP32, "gradients": n * FP32, "optimizer": held * ADAM}


# ---- the protocol and its defaults -------------------------------------------------------------------
class CostModel(Protocol):
    """All the planner may ask a benchmark."""

    def parameters(self, cfg: Any) -> dict[str, int]:
        """{'total': all parameters, 'trainable': those with gradients} of the model `cfg` builds."""
        ...

    def rank_bytes(self, cfg: Any, layout: Any, device: str) -> dict[str, float]:
        """The busiest rank's bytes by part ('weights', 'gradients', 'optimizer', ...) and its
        'parameters_rank' (a count), as the harness's implementation builds and shards the model
        on `device` ('cuda' or 'cpu') with `layout` (anything with tp/pp/vp/cp/dp)."""
        ...

    def workload(self, cfg: Any, size: str) -> Workload: ...

    def params_per_stage(self, w: Workload, tp: int, pp: int) -> float: ...

    def evals(self, w: Workload, samples: float, gbs: int) -> tuple[float, float]:
        """(evaluations during a timed run of `samples`, samples per evaluation)."""
        ...

    def samples_per_rcp_unit(self, gbs: int, ruleset: str) -> float: ...

    def learning_rate(self, w: Workload, gbs: int) -> float | None:
        """The learning rate the closed rules tie to the global batch, or None."""
        ...

    def policy(self, w: Workload, hw: Any, k: dict, impl: str) -> dict[str, Any]:
        """Choices for every candidate of a search by implementation `impl` ('harness' or
        'record'): harness.planner.search.Policy fields to set."""
        ...

    def harness_overrides(self, w: Workload, c: Any) -> dict[str, Any]:
        """Config fields the harness's implementation runs candidate `c` with, beyond the layout."""
        ...

    def run_overrides(self, w: Workload, c: Any) -> dict[str, Any]:
        """Config overrides `mlperf run` needs for candidate `c`, beyond the layout and batch."""
        ...

    def checkpoint_every_steps(self, cfg: Any) -> int:
        """Steps between the harness's resumable checkpoints (0: none)."""
        ...

    def input_s_per_sample(self, w: Workload, c: Any, hw: Any, k: dict) -> float:
        """Seconds per sample of input work the FLOPs do not count (the step's 'gather' term)."""
        ...

    def input_store_bytes(self, w: Workload, c: Any, world: int, per_node: int) -> dict[str, float]:
        """Accelerator bytes of an input store placed in accelerator memory, by part."""
        ...

    def eval_work(
        self, w: Workload, c: Any, hw: Any, samples: float, rate: float
    ) -> tuple[float, float] | None:
        """(evaluations, seconds of work each) where an evaluation is not forward passes over the
        samples of `evals` (None: it is). `rate`: useful FLOP/s per accelerator."""
        ...

    def explain(self, w: Workload, c: Any, hw: Any, k: dict, breakdown: dict) -> list[dict]:
        """`mlperf plan --explain` lines ({term, formula, value}) of the terms above."""
        ...


class Cost:
    """The defaults of `CostModel`: what a benchmark without the feature answers. A subclass
    implements parameters, rank_bytes and workload, and overrides what differs."""

    def parameters(self, cfg: Any) -> dict[str, int]:
        raise NotImplementedError

    def rank_bytes(self, cfg: Any, layout: Any, device: str = "cuda") -> dict[str, float]:
        raise NotImplementedError

    def workload(self, cfg: Any, size: str) -> Workload:
        raise NotImplementedError

    def params_per_stage(self, w: Workload, tp: int, pp: int) -> float:
        # Untied embeddings: the input one on the first stage, the output one on the last; the
        # layers split evenly over PP; everything split over TP.
        emb = w.vocab * w.hidden
        return ((w.params - 2 * emb) / pp + emb) / tp

    def evals(self, w: Workload, samples: float, gbs: int) -> tuple[float, float]:
        return 0.0, 0.0

    def samples_per_rcp_unit(self, gbs: int, ruleset: str) -> float:
        return 1.0  # RCPs in samples

    def learning_rate(self, w: Workload, gbs: int) -> float | None:
        return None

    def policy(self, w: Workload, hw: Any, k: dict, impl: str) -> dict[str, Any]:
        return {}

    def harness_overrides(self, w: Workload, c: Any) -> dict[str, Any]:
        return {}

    def run_overrides(self, w: Workload, c: Any) -> dict[str, Any]:
        return {}

    def checkpoint_every_steps(self, cfg: Any) -> int:
        return getattr(cfg, "checkpoint_interval_steps", 0)

    def input_s_per_sample(self, w: Workload, c: Any, hw: Any, k: dict) -> float:
        return 0.0

    def input_store_bytes(self, w: Workload, c: Any, world: int, per_node: int) -> dict[str, float]:
        return {}

    def eval_work(
        self, w: Workload, c: Any, hw: Any, samples: float, rate: float
    ) -> tuple[float, float] | None:
        return None

    def explain(self, w: Workload, c: Any, hw: Any, k: dict, breakdown: dict) -> list[dict]:
        return []
