"""What every benchmark definition and config has in common.

`BenchmarkDef` is the rules side (from `benchmarks/<name>/benchmark.yaml`): target, runs per
result, fixed closed-division hyperparameters. `BenchmarkConfig` is the base of each benchmark's
typed config (`benchmarks/<name>/config.py`): the parallel layout and batch sizes that every
benchmark has, plus the GPU-only optimisation switches. Field names follow the MLPerf log keys
where one exists (`global_batch_size`, `opt_base_learning_rate`, ...) and Megatron's names for
parallel degrees, so `--set` speaks the submitters' vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field

from harness.core.schema import Strict


class QualityTarget(Strict):
    metric: str
    """Name of the metric as the rules state it, e.g. 'log_perplexity', 'eval_accuracy', 'FID'."""
    direction: Literal["lower", "higher"]
    """'lower': reached when value <= target; 'higher': reached when value >= target."""
    full: float
    """The rules' target at full (MLPerf) size."""
    tiny: float
    """The calibrated target at tiny size (the tiny rules file uses the same number)."""

    def target(self, size: str) -> float:
        return self.full if size == "full" else self.tiny

    def reached(self, value: float, size: str) -> bool:
        t = self.target(size)
        return value <= t if self.direction == "lower" else value >= t


class BenchmarkDef(Strict):
    """What the installed mlperf-logging does not hold about a benchmark; what it holds (rulesets,
    the name per ruleset, keys, closed literals, quality window, run count, RCPs) is read from it
    (harness/core/rulesets.py, rule_files.py)."""

    name: str
    """Registry name (benchmarks/<name>/); the name logged is the one of the run's ruleset
    (`gnn` up to 4.1.0, `rgat` from 5.0.0: harness.core.rulesets.names_by_ruleset)."""
    aliases: list[str] = []
    title: str
    """Human name, e.g. 'GPT-3 175B pretraining'."""
    quality: list[QualityTarget]
    """All must be reached (Stable Diffusion: FID and CLIP)."""
    eval_cadence: str
    """The rules' evaluation cadence, in words."""
    progress_key: Literal["epoch_num", "samples_count"]
    """Metadata key on `eval_accuracy` lines that measures progress (the RCP unit's carrier)."""
    rcp_unit: Literal["tokens", "samples", "epochs", "images"]
    fixed: dict[str, Any] = {}
    """Closed-division values the rules fix that the package's closed file does not check (log key
    -> value); the ones it checks come from it per ruleset (`closed_values`)."""
    tunable: list[str] = []
    """Closed-division hyperparameters a submitter may choose."""
    sizes: list[Literal["tiny", "full"]] = ["tiny", "full"]
    tiny_rules: dict[str, dict[str, str | list[str]]] = {}
    """Tiny size: records of the ruleset's closed_<name>.yaml replaced (key -> {CHECK or
    ATLEAST_ONE_CHECK: expression}); applied by benchmarks/tiny_rules.py."""

    @property
    def runs_per_result(self) -> int:
        """Official number of runs for a result (mlperf_logging.benchmark_meta, one table for all
        rulesets)."""
        from harness.core.rulesets import runs_required

        return runs_required(self.name) or 1


SPEED_SWITCHES = frozenset(
    {
        "fp8",
        "cuda_graphs",
        "tp_comm_overlap",
        "compile",
        "overlap_grad_reduce",
        "overlap_param_gather",
        "flash_attention",
        "channels_last",
    }
)
"""Switches whose only purpose is speed (what is trained and its memory are the same either way,
up to FP8's rounding). A shipped config turns one on only where a GPU measurement shows it
faster: a row of docs/gpu/speed_evidence.yaml whose two timed checks say so
(tests/unit/test_speed_switches.py). NVIDIA's records turning them on is not a measurement here."""


@dataclass(frozen=True)
class Switch:
    """Where an implementation honours one optimisation switch. Any value but `off` is refused
    (exit 2, one line) by harness/resolve/switches.py where it would have no effect: on a device
    kind not in `on`, without a switch it `needs`, or below a layout degree in `min_degree`."""

    on: tuple[Literal["cpu", "gpu"], ...]
    """Accelerator kinds whose code path honours a value other than `off`; () = not implemented."""
    why: str
    """Why it is refused where it is (one clause: what the code lacks or what NVIDIA's record used)."""
    off: Any = False
    """The value that asks for nothing: always accepted."""
    needs: tuple[str, ...] = ()
    """Other switches that must be on (not at their `off`) for this one to act."""
    min_degree: tuple[tuple[str, int], ...] = ()
    """Layout degrees it needs, e.g. (("tp", 2),): sequence parallelism splits over TP ranks."""
    off_max_degree: tuple[tuple[str, int], ...] = ()
    """Layout degrees `off` is wrong beyond, e.g. (("world_size", 1),): llama2 without FSDP has no
    other gradient sync, so two ranks would each train their own copy."""
    library: str | None = None
    """Top-level module the switch's code imports, e.g. "transformer_engine": where it is not
    installed, `mlperf run` refuses the switch before launching anything (found with
    importlib.util.find_spec, nothing imported) and `--dry-run` notes it (harness/resolve/switches.py)."""


class BenchmarkConfig(Strict):
    """Layout, batch and optimisation switches shared by all four benchmarks."""

    global_batch_size: int = Field(ge=1)
    """Sequences/samples/images per optimizer step across all ranks (logged `global_batch_size`)."""
    micro_batch_size: int = Field(1, ge=1)
    """Samples per rank per forward/backward; GA = GBS / (DP x MBS)."""
    tensor_model_parallel_size: int = Field(1, ge=1)
    """TP degree (kept within a node's NVLink domain)."""
    pipeline_model_parallel_size: int = Field(1, ge=1)
    """PP degree."""
    virtual_pipeline_model_parallel_size: int = Field(1, ge=1)
    """Interleaved pipeline chunks per stage (VP); 1 = no interleaving."""
    context_parallel_size: int = Field(1, ge=1)
    """CP degree: the sequence split across ranks (long-sequence attention)."""
    fp8: bool = False
    """FP8 matmuls (GPU only; each benchmark's SWITCHES says how, or that it has none)."""
    cuda_graphs: bool = False
    """Capture the step in CUDA graphs (GPU only; each benchmark's SWITCHES says how, or that it has none)."""
    seed_offset: int = Field(0, ge=0)
    """Added to the run seed for data order (kept 0 except for debugging)."""

    # Every optimisation switch of the benchmark (fp8 and cuda_graphs included) and where its
    # implementation honours it; checked in ONE place, harness/resolve/switches.py.
    SWITCHES: ClassVar[dict[str, Switch]] = {}
    # Parallel degrees beyond DP that the implementation supports (e.g. ("tp", "pp", "vp", "cp")).
    SUPPORTS: ClassVar[tuple[str, ...]] = ()
    # A `precision` field's value as the lowest_numerical_precision_* log keys spell it.
    LOG_DTYPE: ClassVar[dict[str, str]] = {"fp32": "fp32", "bf16": "bfloat16", "fp16": "fp16"}

    def lowest_precision(self, device: str) -> dict[str, str]:
        """{'linear': ..., 'attn': ..., 'comm': ...}: the lowest numerical precision the code really
        runs in the matmuls of linear layers, in attention, and in what ranks send each other
        (gradients, activations, gathered parameters), spelt as ruleset 6.1.0's mandatory
        lowest_numerical_precision_in_* keys allow ('fp8', 'fp16', 'bfloat16', 'tf32', 'fp32').

        device: the RunPlan's 'cpu' or 'cuda', for what acts on one device kind only. A one-rank
        run exchanges nothing; it still discloses what the code would send. (Not `precision`: three
        configs have a field of that name.) Each benchmark's config says per value which code decides.
        """
        raise NotImplementedError(f"{type(self).__name__} does not disclose its numerical precisions")


def gpu_only(cls: type[BenchmarkConfig]) -> list[str]:
    """The switches that only a GPU run honours (the GPU acceptance script of issue 12 turns each on once)."""
    return [k for k, s in cls.SWITCHES.items() if s.on == ("gpu",)]
