"""`RunPlan`: the only thing that crosses from the harness into a training process.

The harness resolves (benchmark, system, size, overrides) into a frozen RunPlan, writes it as
`plan.json` into the run folder, and every rank runs `python -m <impl.module> --plan plan.json`
(harness/core/benchmark.py). The training code never parses CLI flags of its own and never reads system
YAML; the plan's `task` says what the process does (train, prepare data, or an LR sweep).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from harness.core.files import atomic_write
from harness.core.layout import Layout
from harness.core.schema import Strict, load_json, validate


class Submission(Strict):
    org: str
    division: Literal["closed", "open"]
    status: str
    """Logged `submission_status` (onprem/cloud/research/preview)."""
    platform: str
    """Logged `submission_platform`, '<nodes>x<platform>'."""
    system: str
    """System id (results folder name)."""


# MLPerf Power (training_policies power_measurement.adoc): at least 60 readings per node in the
# measurement window; a shorter run keeps training (same loop) until they exist.
MIN_POWER_READINGS = 60


class RunPlan(Strict):
    schema_version: int = 1
    benchmark: str
    size: Literal["tiny", "full"]
    ruleset: str
    """The MLPerf ruleset the run follows (mlperf-logging's training_X.Y.Z), logged `harness_ruleset`."""
    ruleset_source: str = ""
    """Why that ruleset: --ruleset, --round, or the default (the newest that lists the benchmark)."""
    logged_name: str | None = None
    """`submission_benchmark` in that ruleset when it differs from `benchmark` (gnn -> rgat from 5.0.0)."""
    disclosure: dict[str, str | int] = {}
    """How the run trains, logged in the header (mandatory from ruleset 6.1.0, allowed before):
    lowest_numerical_precision_in_{linear,attn,comm}, {tensor,pipeline,context,expert}_parallelism,
    micro_batch_size, config_filename (harness/resolve/runplans.py `disclosure`)."""
    submission: Submission
    task: Literal["train", "prepare", "lr_find", "build"] = "train"
    """What the process started with this plan does (harness/train/entry.py dispatches on it)."""
    config: dict[str, Any]
    """Resolved benchmark config (typed: `benchmarks.get(plan.benchmark).typed(plan.config)`; in a
    rank: `rt.cfg`)."""
    provenance: dict[str, str]
    """Where each config value came from: default, size preset, system config, --set, derived."""
    layout: Layout
    target: dict[str, float]
    """Quality target per metric for this size."""
    seed: int
    run_index: int
    """0-based index of this run within the `mlperf run` invocation."""
    data_dir: str
    run_dir: str
    """Artifacts of this run (plan.json, stdout, timings); not part of the submission tree."""
    log_path: str
    """Where rank 0 writes the MLPerf log while the run is in progress."""
    device: Literal["cpu", "cuda"]
    threads_per_process: int
    cache_cleared: bool = False
    """Whether caches were really dropped before this run (logged `cache_clear`)."""
    power_min_readings: int = 0
    """Power mode (the system has `power:`): the training loop goes on after run_stop, same code
    and markers, until every node's sampler has this many readings since run_start (MLPerf Power:
    MIN_POWER_READINGS); 0 = no power measurement."""
    resume_from: str | None = None

    @property
    def submission_benchmark(self) -> str:
        """The benchmark's name in the run's ruleset: logged, and the result folder's name."""
        return self.logged_name or self.benchmark

    def save(self, path: Path) -> None:
        atomic_write(path, self.model_dump_json(indent=2))

    @classmethod
    def load(cls, path: Path) -> RunPlan:
        """The plan in `path`; a truncated, edited or foreign plan.json is one ConfigError line
        naming the file and the field (a resumed run reads a folder the user may have touched)."""
        return validate(cls, load_json(Path(path), "a run plan (plan.json)"), str(path))
