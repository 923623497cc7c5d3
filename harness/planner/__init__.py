"""`mlperf plan`: choose the parallel layout, check memory, predict time-to-train — without torch.

    hardware.py     Hardware (node shape, peaks, memory, bandwidths) from a SystemSpec or an official JSON
    workloads.py    per-benchmark facts: FLOPs/sample, shapes, eval cadence, the rules tied to the GBS
    rcp.py          samples to converge at a GBS from the official RCP tables (mlperf-logging)
    memory.py       GiB per accelerator for a candidate (weights, grads, optimizer, activations, ...)
    timing.py       step-time breakdown and predicted minutes
    search.py       candidate enumeration (validated by harness.layout.derive), ranking
    calibration.py  constants (data/efficiency.yaml) and the published results (data/published.yaml)
    fitting.py      fit of the constants and the power-law baseline (bench scripts only; uses scipy)
    plot.py         predicted time vs accelerator count with the published points (--plot)

Entry points: `plan(bench, system)` -> search.Plan, and `best_config(bench, system)` -> the config
overrides of the best layout, for `mlperf run` on a system without a tuned config.
"""

from __future__ import annotations

from harness.planner import hardware
from harness.planner.search import Plan, search_layouts


def resolve_hardware(system) -> hardware.Hardware:
    """A Hardware from a Hardware, a SystemSpec, a shipped system name or a descriptor/JSON path."""
    if isinstance(system, hardware.Hardware):
        return system
    if isinstance(system, str):
        if system.endswith(".json"):
            from pathlib import Path

            return hardware.from_official_json(Path(system))
        from harness import systems

        system = systems.load(system)
    return hardware.from_spec(system)


def plan(bench_name: str, system, global_batch_size: int | None = None) -> Plan:
    return search_layouts(bench_name, resolve_hardware(system), gbs=global_batch_size)


def best_config(bench_name: str, system, global_batch_size: int | None = None) -> dict:
    """Config overrides for the predicted-fastest layout: tensor/pipeline/virtual-pipeline/context
    parallel sizes (transformers), micro_batch_size, global_batch_size, and opt_base_learning_rate
    where the rules tie it to the GBS (gpt3). Raises ConfigError (exit 2) when nothing fits."""
    from harness.planner import workloads

    p = plan(bench_name, system, global_batch_size)
    return p.options[0].overrides(workloads.get(p.bench))


__all__ = ["Plan", "best_config", "plan", "resolve_hardware"]
