"""`mlperf run`: (benchmark, system, size, overrides) → RunPlans → launcher → result files.

plans = make_plans("gpt3", "cpu-local", runs=3)     # validated; nothing started
report = execute(plans, system)                      # prepare data, launch, claim results
"""

from __future__ import annotations

import importlib
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

import benchmarks
from harness import config as config_mod
from harness import layout as layout_mod
from harness import systems
from harness.errors import ConfigError
from harness.plan import RunPlan, Submission

DEFAULT_DATA_ROOT = Path(
    os.environ.get("MLPERF_DATA_DIR", Path.home() / ".cache" / "mlperf-harness" / "data")
)


@dataclass
class Resolved:
    """Everything --dry-run shows: the plans plus the system and where values came from."""

    plans: list[RunPlan]
    system: systems.SystemSpec
    definition: benchmarks.BenchmarkDef
    sources: list[str]
    launcher: str
    notes: list[str] = field(default_factory=list)


def default_size(system: systems.SystemSpec) -> str:
    return "tiny" if system.accelerator.kind == "cpu" else "full"


def resolve(
    benchmark: str,
    system: str,
    size: str | None = None,
    runs: int | None = None,
    seed: int | None = None,
    results_dir: str | Path = "results",
    sets=(),
    nproc_per_node: int | None = None,
    data_dir: str | Path | None = None,
    launcher: str | None = None,
) -> Resolved:
    from harness import launch

    defn = benchmarks.get(benchmark)
    spec = systems.load(system)
    if nproc_per_node is not None:
        spec = spec.with_overrides(accelerators_per_node=nproc_per_node)
    size = size or default_size(spec)
    if size not in defn.sizes:
        raise ConfigError(f"{defn.name} has no '{size}' size (sizes: {', '.join(defn.sizes)})")
    overrides = config_mod.parse_sets(sets)
    notes: list[str] = []

    def planner(sets: dict) -> dict:
        from harness import planner as planner_mod

        notes.append(
            f"no tuned config for {spec.name}: using the best layout of "
            f"`mlperf plan {defn.name} --system {spec.name}`"
        )
        return planner_mod.best_config(defn.name, spec, sets.get("global_batch_size"))

    cfg, provenance, sources = config_mod.resolve(defn, size, spec.name, spec.division, overrides, planner)
    cls = type(cfg)
    if spec.accelerator.kind == "cpu":
        for key in cls.GPU_ONLY:
            if getattr(cfg, key):
                raise ConfigError(
                    f"{key}=true needs a GPU, but system '{spec.name}' has CPU accelerators "
                    f"({provenance[key]}); use a GPU system or --set {key}=false"
                )
    lay = layout_mod.derive(
        cfg,
        spec.nodes,
        spec.accelerators_per_node,
        spec.domain_size,
        num_layers=getattr(cfg, "num_layers", None),
        supports=cls.SUPPORTS,
    )
    n = runs if runs is not None else defn.runs_per_result
    if n < 1:
        raise ConfigError(f"--runs {n}: need at least one run")
    base_seed = seed if seed is not None else secrets.randbelow(2**31 - n)
    data = Path(data_dir) if data_dir else DEFAULT_DATA_ROOT / defn.name / size
    stamp = time.strftime("%Y%m%d-%H%M%S")
    runs_root = Path(results_dir).resolve() / "runs" / defn.name / spec.name
    sub = Submission(
        org=spec.submitter,
        division=spec.division,
        status=spec.log_status,
        platform=spec.submission_platform,
        system=spec.name,
    )
    plans = []
    for i in range(n):
        run_dir = runs_root / f"{stamp}-{os.getpid()}-{i}"
        plans.append(
            RunPlan(
                benchmark=defn.name,
                size=size,
                ruleset=defn.ruleset,
                submission=sub,
                config_class=defn.config_class,
                config=cfg.model_dump(),
                provenance=provenance,
                layout=lay,
                target={q.metric: q.target(size) for q in defn.quality},
                seed=base_seed + i,
                run_index=i,
                data_dir=str(data.resolve()),
                run_dir=str(run_dir),
                log_path=str(run_dir / "mlperf.log"),
                device="cpu" if spec.accelerator.kind == "cpu" else "cuda",
                threads_per_process=spec.threads(),
            )
        )
    kind = launch.choose(launcher, spec, lay.world_size)
    return Resolved(plans, spec, defn, sources, kind, notes)


def write_plans(plans: list[RunPlan]) -> None:
    for p in plans:
        Path(p.run_dir).mkdir(parents=True, exist_ok=True)
        p.save(Path(p.run_dir) / "plan.json")


def make_plans(
    benchmark: str,
    system: str,
    size: str | None = "tiny",
    runs: int = 1,
    seed: int | None = None,
    results_dir: str | Path = "results",
    sets=(),
    nproc_per_node: int | None = None,
    data_dir: str | Path | None = None,
) -> list[RunPlan]:
    """Resolve and write plan.json files (what tests and `mlperf prepare` use)."""
    r = resolve(benchmark, system, size, runs, seed, results_dir, sets, nproc_per_node, data_dir)
    write_plans(r.plans)
    return r.plans


def entry_module(plan: RunPlan, suffix: str = "") -> str:
    return benchmarks.get(plan.benchmark).entrypoint + suffix


def is_prepared(plan: RunPlan) -> bool:
    try:
        manifest = importlib.import_module(entry_module(plan, ".manifest"))
    except ModuleNotFoundError:
        return False
    return bool(manifest.is_prepared(plan))
