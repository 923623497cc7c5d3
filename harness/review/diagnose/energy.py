"""Energy per sample of a run measured in power mode (harness/run/power), for `mlperf diagnose`:

    J per sample = mean node power over the timed part (the streams' integral from run_start to
                   run_stop, x conversion_eff, / time-to-train)  /  samples per second of the
                   training steps (timings.jsonl: all samples / all step time)

and, where the NVML sidecar has data, the GPUs' own energy over the same span and per sample.
Nothing when the run folder has no power streams.
"""

from __future__ import annotations

import json

from harness.core.power_stream import energy_j, gpu_telemetry, nodes, readings


def profile(run) -> tuple[dict, str] | None:
    """({energy_j, energy_per_sample_j, ...}, the one-line note), or None without power streams."""
    idx = nodes(run.run_dir) if run.run_dir is not None else []
    if not idx:
        return None
    times = {e.get("key"): e.get("time_ms") for e in reversed(run.events)}  # the first of each
    start, stop = times.get("run_start"), times.get("run_stop")
    if start is None or stop is None or stop <= start:
        return None
    try:
        eff = json.loads((run.run_dir / "power" / "power.json").read_text()).get("conversion_eff", 1.0)
    except (OSError, ValueError):
        eff = 1.0
    joules = eff * sum(energy_j(readings(run.run_dir, i), start, stop) for i in idx)
    samples = sum(r.get("samples") or 0 for r in run.timings)
    step_s = sum(r.get("step_time_s") or 0 for r in run.timings)
    out = {"energy_j": joules, "mean_node_power_w": joules / ((stop - start) / 1000)}
    note = f"energy: {joules / 1000:.3g} kJ over the timed run ({len(idx)} node(s), conversion_eff {eff:g})"
    if samples and step_s:
        out["energy_per_sample_j"] = out["mean_node_power_w"] / (samples / step_s)
        note += f", {out['energy_per_sample_j']:.3g} J per sample at {samples / step_s:.4g} samples/s"
    gpu = [gpu_telemetry(run.run_dir, i, start, stop) for i in idx]
    if any("note" in g for g in gpu):
        note += f"; GPUs: {next(g['note'] for g in gpu if 'note' in g)}"
    else:
        out["gpu_energy_j"] = sum(g["gpu_energy_j"] for g in gpu)
        note += f"; GPUs {out['gpu_energy_j'] / 1000:.3g} kJ"
    return out, note
