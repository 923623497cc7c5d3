"""`mlperf plan`: choose the parallel layout, check memory, predict time-to-train — without torch.

    hardware.py     Hardware (node shape, peaks per precision, memory, bandwidths) from a SystemSpec
                    or an official JSON; accelerator names matched against data/accelerators.yaml
    stacks.py       the software stack a system ran (data/stacks.yaml) and its fitted factor
    params.py       the benchmark's cost model (benchmarks/<name>/cost.py; one line when it has
                    none): parameter counts and per-rank weight/gradient/optimizer bytes (exact)
    workloads.py    the Workload its cost model derives from a typed config (FLOPs/sample, shapes,
                    ...), and its samples to converge
    rcp.py          samples to converge at a GBS, as the official RCP checker sees them
    memory.py       GiB per accelerator for a candidate (weights, grads, optimizer, activations, ...)
    timing.py       step-time breakdown and predicted minutes
    search.py       candidate enumeration (validated by harness.core.layout.derive), ranking, pricing
    calibration.py  constants (data/efficiency.yaml) and the published results (data/published.yaml)
    selfcal.py      `--calibrate`: the mlperf-harness constants fitted on the user's own runs
    report.py / explain.py   the JSON document, the table, `--explain`
    fitting.py      the fit (starting values: data/priors.yaml) and the held-out errors (bench
                    scripts only; uses scipy)
    plot.py         predicted time vs accelerator count with the published points (--plot)

Entry points: `plan(bench, system)` -> search.Plan, `price_run(...)` -> the Plan of one resolved
run, and `best_config(bench, system)` -> the config overrides of the best layout, for `mlperf run`
on a system without a tuned config. `bench` is always the Benchmark object (benchmarks.get at the
CLI boundary); the planner asks its cost model and never names a benchmark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.planner import hardware
from harness.planner.search import RULESET, Plan, implementation, search_layouts

if TYPE_CHECKING:
    from benchmarks.benchmark import Benchmark


def resolve_hardware(system) -> hardware.Hardware:
    """A Hardware from a Hardware, a SystemSpec, a shipped system name or a descriptor/JSON path."""
    if isinstance(system, hardware.Hardware):
        return system
    if isinstance(system, str):
        if system.endswith(".json"):
            from pathlib import Path

            return hardware.from_official_json(Path(system))
        from harness.resolve import systems

        system = systems.load(system)
    return hardware.from_spec(system)


def plan(bench: Benchmark, system, global_batch_size: int | None = None, stack=None, user=None) -> Plan:
    return search_layouts(bench, resolve_hardware(system), gbs=global_batch_size, stack=stack, user=user)


def best_config(
    bench: Benchmark, system, global_batch_size: int | None = None, ruleset: str = RULESET
) -> dict:
    """Config overrides of the predicted-fastest layout that the harness's own implementation can
    run (stack mlperf-harness): tensor/pipeline/virtual-pipeline/context parallel sizes,
    micro_batch_size, global_batch_size, opt_base_learning_rate where the rules tie it to the GBS,
    and what the cost model's memory assumed of the run (`run_overrides`, e.g. the recompute the
    layout only fits with). Raises ConfigError (exit 2) when nothing fits or the rules allow no
    batch for this system; the batch sizes allowed are those of `ruleset`'s RCPs. The runner's
    fallback (harness.resolve.runplans)."""
    from harness.planner import stacks

    p = search_layouts(
        bench,
        resolve_hardware(system),
        gbs=global_batch_size,
        stack=stacks.make("mlperf-harness"),
        ruleset=ruleset,
    )
    w, best = p.workload, p.options[0]
    assert w is not None
    out = best.overrides(w)
    out.update(w.cost.run_overrides(w, best.candidate))
    return out


def price_run(
    bench: Benchmark,
    system: str,
    size=None,
    sets=(),
    nproc_per_node=None,
    stack=None,
    user=None,
    ruleset=None,
    round_name=None,
    nodes=None,
) -> Plan:
    """The run `mlperf run BENCH --system SYSTEM [--size] [--set] [--nproc-per-node] [--nodes]` would start,
    resolved by the same code (harness.resolve.runplans), priced under `stack` (default: the
    system's own)."""
    from harness.planner import search, stacks, workloads
    from harness.planner.params import cost
    from harness.resolve import runplans

    cost(bench)  # no cost model: its one line before anything is resolved
    r = runplans.resolve_runs(
        bench,
        system,
        size=size,
        runs=1,
        sets=sets,
        nproc_per_node=nproc_per_node,
        nodes=nodes,
        fallback=best_config,
        ruleset=ruleset,
        round_name=round_name,
        implemented=False,  # pricing needs the cost model, not the training code
    )
    rp = r.plans[0]
    cfg = bench.typed(rp.config)
    hw = hardware.from_spec(r.system)
    st = stack or stacks.recognise(hw)
    w = workloads.get(bench, cfg, rp.size)
    rc = getattr(cfg, "activation_recompute", None) or (
        "full" if getattr(cfg, "activation_checkpointing", False) else "none"
    )
    return search.price(w, hw, rp.layout, st, user=user, recompute=rc, ruleset=rp.ruleset)


__all__ = ["Plan", "best_config", "implementation", "plan", "price_run", "resolve_hardware"]
