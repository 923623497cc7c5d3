"""(benchmark, system, size, --set) -> one RunPlan per run, validated; nothing is started or written.

    r = resolve_runs(benchmarks.get("gpt3"), "cpu-local", runs=3)   # Resolved: plans + system + provenance
    harness/run/execute.py writes r.plans into their run folders and launches them

Pure: reads benchmarks/ and systems/ YAML only. A full-size system without a tuned config needs a
`fallback` that proposes one (the run layer passes the planner's best layout).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import benchmarks
from harness.core import layout as layout_mod
from harness.core import rulesets
from harness.core.benchmark import Implementation
from harness.core.errors import ConfigError, suggest
from harness.core.runplan import MIN_POWER_READINGS, RunPlan, Submission
from harness.resolve import config as config_mod
from harness.resolve import switches, systems

DEFAULT_DATA_ROOT = Path(
    os.environ.get("MLPERF_DATA_DIR", Path.home() / ".cache" / "mlperf-harness" / "data")
)
LAUNCHERS = ("local", "torchrun", "slurm")
"""Launcher kinds (harness/run/launch/): one process, torchrun on one node, Slurm."""
# Runs one `mlperf run` makes in sequence: the official counts are 3 (gpt3) and 10; a larger figure is
# a typo (3000000000 used to reach secrets.randbelow and crash).
MAX_RUNS = 100
# Seeds fit a signed int32, what every RNG the benchmarks seed (torch, numpy, python) accepts.
SEED_MAX = 2**31 - 1

# fallback(benchmark, system spec, global batch size or None, ruleset) -> config values for the system
Fallback = Callable[[benchmarks.Benchmark, "systems.SystemSpec", "int | None", str], dict]


@dataclass
class Resolved:
    """Everything --dry-run shows: the plans plus the system and where values came from."""

    plans: list[RunPlan]
    system: systems.SystemSpec
    benchmark: benchmarks.Benchmark
    sources: list[str]
    launcher: str
    notes: list[str] = field(default_factory=list)
    closed: dict[str, tuple[tuple | None, str, str]] = field(default_factory=dict)
    """The closed-division hyperparameters at this ruleset and size: log key -> (allowed values or
    None, the rule in words, the file it is in)."""


def default_size(system: systems.SystemSpec) -> str:
    return "tiny" if system.accelerator.kind == "cpu" else "full"


def choose_launcher(kind: str | None, system, world_size: int) -> str:
    """The launcher: --launcher, else the system's; a one-process launcher can't run N ranks."""
    k = kind or system.launcher.kind
    if k not in LAUNCHERS:
        raise ConfigError(
            f"--launcher {k}: unknown launcher{suggest(k, LAUNCHERS)}; choose one of {', '.join(LAUNCHERS)}"
        )
    if k == "local" and world_size > 1:
        k = "torchrun"  # N ranks on one host: torchrun is the standard rendezvous
    if k == "torchrun" and system.nodes > 1:
        raise ConfigError(
            f"system '{system.name}' has {system.nodes} nodes: torchrun alone launches one node; "
            f"use --launcher slurm"
        )
    return k


def resolve_runs(
    bench: benchmarks.Benchmark,
    system: str,
    size: str | None = None,
    runs: int | None = None,
    seed: int | None = None,
    results_dir: str | Path = "results",
    sets=(),
    nproc_per_node: int | None = None,
    data_dir: str | Path | None = None,
    launcher: str | None = None,
    fallback: Fallback | None = None,
    ruleset: str | None = None,
    round_name: str | None = None,
    nodes: int | None = None,
    implemented: bool = True,
) -> Resolved:
    """`implemented=False` resolves a benchmark without an implementation too (`mlperf plan`
    prices its layouts); `mlperf run` keeps the default, which refuses it in one line."""
    from benchmarks.tiny_rules import closed_values

    defn = bench.rules
    rs, logged, rs_how = rulesets.for_run(bench.official, ruleset, round_name)
    spec = systems.load(system)
    if nproc_per_node is not None:
        spec = spec.with_overrides(accelerators_per_node=nproc_per_node)
    size = size or default_size(spec)
    if size not in defn.sizes:
        raise ConfigError(f"{bench.name} has no '{size}' size (sizes: {', '.join(defn.sizes)})")
    overrides = config_mod.parse_sets(sets)
    notes: list[str] = [n for n in [systems.source_note(system)] if n]
    tuned_name = spec.name  # a descriptor's tuned config applies at any scale
    if nodes is not None and nodes != spec.nodes:  # --nodes: the same descriptor at another scale
        scaled = systems.at_nodes(spec, nodes)
        notes.append(
            f"--nodes {nodes}: {spec.name} at {nodes} node(s) (its descriptor: {spec.nodes}), filed as "
            f"system '{scaled.name}' (a system JSON states one node count)"
        )
        spec = scaled
        kind = launcher or spec.launcher.kind
        if nodes > 1 and kind != "slurm":  # said before the layout: that is not what is wrong
            raise ConfigError(
                f"--nodes {nodes}: system '{tuned_name}' starts its ranks with {kind}, which runs on one "
                f"node; give --launcher slurm (or a descriptor with launcher: {{kind: slurm}}) or --nodes 1"
            )

    def proposed(sets: dict) -> dict:
        if fallback is None:
            raise ConfigError(
                f"no tuned config for {bench.name} on {spec.name} "
                f"({config_mod.rel(bench.configs_dir / (spec.name + '.yaml'))}) and no planner to propose one"
            )
        notes.append(
            f"no tuned config for {spec.name}: using the best layout of "
            f"`mlperf plan {bench.name} --system {spec.name}`"
        )
        return fallback(bench, spec, sets.get("global_batch_size"), rs)

    closed = closed_values(bench, rs, size)
    cfg, provenance, sources = config_mod.resolve(
        bench, size, tuned_name, spec.division, overrides, proposed, closed, rs, spec.tuned_config
    )
    lay = layout_mod.derive(
        cfg,
        spec.nodes,
        spec.accelerators_per_node,
        spec.domain_size,
        # what PP x VP must split evenly: the layers, or a MoE config's pipeline units
        num_layers=getattr(cfg, "pipeline_layers", None) or getattr(cfg, "num_layers", None),
        supports=type(cfg).SUPPORTS,
    )
    # Every switch is honoured here or refused with one line, on CPU and GPU systems alike.
    switches.check(bench, cfg, provenance, spec.name, spec.accelerator.kind, lay)
    # A switch whose library is absent here: noted now, refused by `mlperf run` before launch.
    notes += switches.library_notes(bench, cfg.model_dump())
    impl = runnable(bench) if implemented else bench.impl
    if spec.power is not None and impl is not None and not impl.power_extension:
        need_s = MIN_POWER_READINGS * spec.power.interval_s
        notes.append(
            f"power: {bench.name}'s loop ends at run_stop; a run shorter than {MIN_POWER_READINGS} readings "
            f"({need_s:g} s at interval_s {spec.power.interval_s:g}) is claimed without energy"
        )
    n = runs if runs is not None else defn.runs_per_result
    if not 1 <= n <= MAX_RUNS:
        raise ConfigError(
            f"--runs {n}: give 1 to {MAX_RUNS} runs (the official count is {defn.runs_per_result})"
        )
    if seed is not None and not 0 <= seed <= SEED_MAX - (n - 1):
        raise ConfigError(
            f"--seed {seed}: give 0 to {SEED_MAX - (n - 1)} (run i uses seed+i, and seeds are 31-bit)"
        )
    base_seed = seed if seed is not None else secrets.randbelow(SEED_MAX + 1 - (n - 1))
    data = Path(data_dir) if data_dir else DEFAULT_DATA_ROOT / bench.name / size
    stamp = time.strftime("%Y%m%d-%H%M%S")
    runs_root = Path(results_dir).resolve() / "runs" / bench.name / spec.name
    sub = Submission(
        org=spec.submitter,
        division=spec.division,
        status=spec.log_status,
        platform=spec.submission_platform,
        system=spec.name,
    )
    told = disclosure(cfg, lay, "cpu" if spec.accelerator.kind == "cpu" else "cuda", sources)
    plans = []
    for i in range(n):
        run_dir = runs_root / f"{stamp}-{os.getpid()}-{i}"
        plans.append(
            RunPlan(
                benchmark=bench.name,
                size=size,
                ruleset=rs,
                ruleset_source=rs_how,
                logged_name=None if logged == bench.name else logged,
                disclosure=told,
                submission=sub,
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
                power_min_readings=MIN_POWER_READINGS if spec.power is not None else 0,
            )
        )
    kind = choose_launcher(launcher, spec, lay.world_size)
    return Resolved(plans, spec, bench, sources, kind, notes, closed)


def runnable(bench: benchmarks.Benchmark) -> Implementation:
    """The benchmark's implementation, or the one line saying the harness does not run it (yet)."""
    if bench.impl is None:
        plan = f", `mlperf plan {bench.name}` prices its layouts" if bench.cost is not None else ""
        raise ConfigError(
            f"{bench.name} has no implementation here: the harness does not run it yet; `mlperf check` "
            f"and `mlperf results` read its logs{plan}; `mlperf run` runs {', '.join(benchmarks.runs())}"
        )
    return bench.impl


def disclosure(cfg, lay: layout_mod.Layout, device: str, sources: list[str]) -> dict[str, str | int]:
    """The run-config keys ruleset 6.1.0 makes mandatory, from what the run really does: the
    precisions from the typed config's `precision` (the code's dtypes per switch), the layout's
    degrees (expert parallelism from the layout: 1 for a model without experts), the micro batch size, and the
    name of the most specific config file (the system's YAML, tiny.yaml, or the planner's proposal)."""
    prec = cfg.lowest_precision(device)
    last = sources[-1] if sources else "defaults"
    if last.startswith("--set") and len(sources) > 1:
        last = sources[-2]
    inner = last[last.find("(") + 1 : last.rfind(")")] if "(" in last else last
    name = os.path.basename(inner) if inner.endswith(".yaml") else inner.strip("`")
    return {
        "lowest_numerical_precision_in_linear": prec["linear"],
        "lowest_numerical_precision_in_attn": prec["attn"],
        "lowest_numerical_precision_in_comm": prec["comm"],
        "tensor_parallelism": lay.tp,
        "pipeline_parallelism": lay.pp,
        "context_parallelism": lay.cp,
        "expert_parallelism": lay.ep,
        "micro_batch_size": lay.micro_batch_size,
        "config_filename": name or "defaults",
    }
