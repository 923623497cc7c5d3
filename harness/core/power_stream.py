"""The raw power streams in a run folder, as harness/run/power/sampler.py writes them; read by the
run layer (power files), the training loop (the 60-reading wait) and `mlperf diagnose`.

    RUN_DIR/power/node_<i>.raw.jsonl   a line per reading   {"t_ms": 1733380000123, "w": 812.0}
                                       or failed read       {"t_ms": ..., "error": "no answer within 0.15 s"}
                                       or refusal (alone)   {"t_ms": ..., "fatal": "node 0 (...): ..."}
    RUN_DIR/power/node_<i>.gpu.jsonl   NVML beside it       {"t_ms": ..., "w": [312.5, ...], "j": [1.2e6, ...]}
                                       (board power W and the energy counter J per GPU), or one
                                       {"t_ms": ..., "note": "no NVIDIA driver ..."} where there is none

t_ms is the host clock MLLOG stamps with (time.time()), so readings and log events compare directly.
"""

from __future__ import annotations

import bisect
import json
from pathlib import Path


def raw_path(run_dir: Path | str, node: int) -> Path:
    return Path(run_dir) / "power" / f"node_{node}.raw.jsonl"


def gpu_path(run_dir: Path | str, node: int) -> Path:
    return sidecar_of(raw_path(run_dir, node))


def sidecar_of(raw: Path) -> Path:
    """node_<i>.raw.jsonl -> node_<i>.gpu.jsonl, its NVML sidecar."""
    return raw.with_name(raw.name.replace(".raw.jsonl", ".gpu.jsonl"))


def nodes(run_dir: Path | str) -> list[int]:
    """Node indices with a raw stream, in order."""
    found = (Path(run_dir) / "power").glob("node_*.raw.jsonl")
    return sorted(int(p.name.split(".")[0].removeprefix("node_")) for p in found)


def lines(path: Path) -> list[dict]:
    """Every whole JSON line of a stream (a line cut by a kill, the last, is left out)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def readings(run_dir: Path | str, node: int) -> list[tuple[int, float]]:
    """(t_ms, watts) of a node's stream, failed reads left out."""
    return [(int(r["t_ms"]), float(r["w"])) for r in lines(raw_path(run_dir, node)) if "w" in r]


def energy_j(stream: list[tuple[int, float]], start_ms: int, stop_ms: int) -> float:
    """Joules from start_ms to stop_ms, each reading held back to the one before it (the official
    summarizer's integral, sum P_i x (t_i - t_i-1)), the interval clipped to [start, stop]."""
    total, prev = 0.0, start_ms
    for t, w in stream:
        if t <= start_ms:
            continue
        t_end = min(t, stop_ms)
        total += w * (t_end - prev) / 1000
        prev = t_end
        if t >= stop_ms:
            break
    return total


def gpu_telemetry(run_dir: Path | str, node: int, start_ms: int, stop_ms: int) -> dict:
    """What the node's NVML sidecar says about [start_ms, stop_ms]: {"note": why there is none},
    or {"gpus", "gpu_energy_j" (the counters' difference, all GPUs), "readings" (node readings in
    the span), "below_gpus" (of those, how many read less than the sum of the GPUs' board power at
    the nearest sidecar line: the node cannot draw less than its GPUs, so the source is wrong or
    measures something else)}."""
    recs = lines(gpu_path(run_dir, node))
    notes = [r["note"] for r in recs if "note" in r]
    data = [r for r in recs if "w" in r and start_ms <= r["t_ms"] <= stop_ms]
    if notes or not data:
        return {"note": notes[0] if notes else "no GPU telemetry in the run's span"}
    energy = sum(b - a for a, b in zip(data[0]["j"], data[-1]["j"]))
    node_w = [(t, w) for t, w in readings(run_dir, node) if start_ms <= t <= stop_ms]
    stamps = [r["t_ms"] for r in data]  # in time order, as written
    below = 0
    for t, w in node_w:  # the nearest sidecar line: one of the two around t
        k = bisect.bisect_left(stamps, t)
        near = min(data[max(k - 1, 0) : k + 1], key=lambda r: abs(r["t_ms"] - t))
        below += w < sum(near["w"])
    return {"gpus": len(data[0]["w"]), "gpu_energy_j": energy, "readings": len(node_w), "below_gpus": below}
