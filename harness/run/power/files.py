"""The power logs of one claimed result, from its run's raw streams (capture.py):

    results/<org>/results/<system>/<benchmark>/power/result_<k>/node_<i>.txt   (and sw_<j>.txt)

node_<i>.txt: power_measurement_start at the last reading at or before run_start, conversion_eff
(metadata measurement_type), every power_reading up to the first reading at or after the end of
the training loop (run_stop, or the last event logged after it when power mode kept the loop
going for the rules' 60 readings; metadata host), power_measurement_stop at that reading. The window thus starts and ends *at a
reading*: a 0.2 s tail after the last reading cost -2.6 % energy in the summarizer's integral.
sw_<j>.txt: the window and interconnect_power_est (max_w x share). Each file is written through
the one MLLOG writer into a hidden temporary name and renamed into place, so a reader never sees
half a file; the folder appears only when every file of the run is complete.

No files (and one line why) when a sampler died during the run, a node has no reading on both
sides of the run, or a node has fewer readings from run_start on than the rules' minimum (a run
too short for its sampling interval, of a benchmark whose loop does not train on after run_stop:
gnn, llama2, SD; full-size runs last minutes and always have them): the result is then claimed
without energy, never with power logs the power check would fail.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from harness.core.mllog import MLLog
from harness.core.mllog_reader import read_events
from harness.core.power_stream import gpu_telemetry, readings
from harness.resolve.power import Power
from harness.run.power.capture import STATUS


def window(stream: list[tuple[int, float]], run_start: int, loop_end: int) -> list[tuple[int, float]] | None:
    """The readings from the last one at or before run_start to the first at or after loop_end."""
    before = [i for i, (t, _) in enumerate(stream) if t <= run_start]
    after = [i for i, (t, _) in enumerate(stream) if t >= loop_end]
    if not before or not after:
        return None
    return stream[before[-1] : after[0] + 1]


def write(
    run_dir: Path, power: Power, result_file: Path, need: int = 0, extends: bool = True
) -> tuple[Path | None, str]:
    """Write the power folder of `result_file`; (folder, '') or (None, why there is none). `need`:
    the readings from run_start on the rules ask of every node (plan.power_min_readings);
    `extends`: whether the benchmark's loop trains on after run_stop to get them (for the line)."""
    run_dir, result_file = Path(run_dir), Path(result_file)
    status_file = run_dir / "power" / STATUS
    if not status_file.exists():
        return None, "no power capture ran for this run"
    status = json.loads(status_file.read_text())
    hostnames = status["hostnames"]
    events = read_events(result_file)
    start = next((e["time_ms"] for e in events if e.get("key") == "run_start"), None)
    stop = next((e["time_ms"] for e in events if e.get("key") == "run_stop"), None)
    if start is None or stop is None:
        return None, "the run has no run_start/run_stop to measure around"
    loop_end = max(stop, max(e["time_ms"] for e in events))  # power mode trains on after run_stop
    for d in status["died"]:
        if d["last_ms"] is None or d["last_ms"] < loop_end:
            at = (
                f"{(d['last_ms'] - start) / 1000:+.1f} s from run_start" if d["last_ms"] else "before reading"
            )
            return None, (
                f"the power sampler of node {d['node']} died during the run (exit {d['returncode']}, last "
                f"reading {at}): result claimed without energy"
            )
    windows = []
    for i in range(len(hostnames)):
        w = window(readings(run_dir, i), start, loop_end)
        if w is None:
            return (
                None,
                f"node {i} has no power reading on both sides of the run: result claimed without energy",
            )
        windows.append(w)
    n = min(sum(t >= start for t, _ in w) for w in windows)
    if n < need:
        why = (
            "the loop stopped training on: a sampler went silent"
            if extends
            else f"its training loop does not train on after run_stop; a run of {need * power.interval_s:g} s "
            f"or longer gets them at interval_s {power.interval_s:g}"
        )
        return None, (
            f"only {n} power readings from run_start on (the rules need {need}; {why}): result claimed "
            "without energy"
        )
    folder = result_file.parent / "power" / result_file.stem
    staging = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for i, (host, w) in enumerate(zip(hostnames, windows)):
        log = MLLog(str(staging / f"node_{i}.txt"))
        log.start("power_measurement_start", time_ms=w[0][0])
        log.event(
            "conversion_eff", power.conversion_eff, {"measurement_type": power.measurement_type}, w[0][0]
        )
        for t, watts in w:
            log.event("power_reading", watts, {"host": host}, time_ms=t)
        log.end("power_measurement_stop", time_ms=w[-1][0])
        log.close()
    t0, t1 = min(w[0][0] for w in windows), max(w[-1][0] for w in windows)
    for j, sw in enumerate(power.interconnect):
        log = MLLog(str(staging / f"sw_{j}.txt"))
        log.start("power_measurement_start", time_ms=t0)
        log.event("interconnect_power_est", sw.estimate_w, {"max_w": sw.max_w, "share": sw.share}, t0)
        log.end("power_measurement_stop", time_ms=t1)
        log.close()
    if folder.exists():  # a resumed run that replaces its attempt's result replaces its power too
        shutil.rmtree(folder)
    os.replace(staging, folder)
    return folder, f"{n} power readings from run_start on, per node; " + _telemetry(
        run_dir, len(windows), start, stop
    )


def _telemetry(run_dir: Path, nodes: int, start: int, stop: int) -> str:
    """One clause on the NVML sidecars over the timed part (run_start..run_stop)."""
    said = []
    for i in range(nodes):
        g = gpu_telemetry(run_dir, i, start, stop)
        if "note" in g:
            said.append(f"node {i}: {g['note']}")
            continue
        check = (
            f"below its GPUs' sum in {g['below_gpus']} of {g['readings']} readings: check the power source"
            if g["below_gpus"]
            else "never below its GPUs' sum"
        )
        said.append(f"node {i}: {g['gpus']} GPU(s) {g['gpu_energy_j'] / 1000:.1f} kJ, node power {check}")
    return "; ".join(said)
