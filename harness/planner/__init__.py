"""`mlperf plan`: choose the parallel layout, check memory, predict time-to-train — without torch.

    hardware.py     Hardware (node shape, peaks, memory, bandwidths) from a SystemSpec or an official JSON
    workloads.py    per-benchmark facts: FLOPs/sample, shapes, eval cadence, the rules tied to the GBS
    rcp.py          samples to converge at a GBS from the official RCP tables (mlperf-logging)
    memory.py       GiB per accelerator for a candidate (weights, grads, optimizer, activations, ...)
    timing.py       step-time breakdown and predicted minutes
    search.py       candidate enumeration (validated by harness.core.layout.derive), ranking
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
        from harness.resolve import systems

        system = systems.load(system)
    return hardware.from_spec(system)


def plan(bench_name: str, system, global_batch_size: int | None = None) -> Plan:
    return search_layouts(bench_name, resolve_hardware(system), gbs=global_batch_size)


def implementation(bench_name: str) -> dict:
    """What the harness's own implementation (benchmarks/<name>/config.py) can run: its parallel
    degrees (`SUPPORTS`), whether it shards weights with FSDP, and its recompute modes."""
    import benchmarks
    from harness.core.errors import ConfigError
    from harness.planner import workloads

    try:
        cls = benchmarks.config_class(bench_name)  # config modules never import torch
    except ConfigError:  # benchmark folder not there (yet): plan as the record implementations run
        return {"supports": workloads.get(bench_name).supports, "fsdp": False, "recompute": None}
    fields = cls.model_fields
    out: dict = {"supports": tuple(getattr(cls, "SUPPORTS", ())), "fsdp": False, "recompute": None}
    if "fsdp" in fields:
        out["fsdp"] = bool(fields["fsdp"].default)
    if "activation_checkpointing" in fields:  # on/off switch: 'full' when on by default
        out["recompute"] = ("full",) if fields["activation_checkpointing"].default else ("none",)
    return out


def best_config(bench_name: str, system, global_batch_size: int | None = None) -> dict:
    """Config overrides of the predicted-fastest layout that the harness's own implementation can
    run: tensor/pipeline/virtual-pipeline/context parallel sizes, micro_batch_size,
    global_batch_size, opt_base_learning_rate where the rules tie it to the GBS (gpt3), and
    activation_recompute when the layout only fits with it (gpt3). Raises ConfigError (exit 2)
    when nothing fits or the rules allow no batch for this system."""
    from harness.planner import workloads
    from harness.planner.search import search_layouts as run

    w = workloads.get(bench_name)
    impl = implementation(w.name)
    p = run(
        w.name,
        resolve_hardware(system),
        gbs=global_batch_size,
        supports=impl["supports"],
        fsdp=impl["fsdp"],
        recompute=impl["recompute"],
    )
    best = p.options[0]
    out = best.overrides(w)
    if w.name == "gpt3" and best.candidate.recompute != "none":
        out["activation_recompute"] = best.candidate.recompute
    return out


__all__ = ["Plan", "best_config", "implementation", "plan", "resolve_hardware"]
