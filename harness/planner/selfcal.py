"""`mlperf plan BENCH --system NAME --calibrate RUN_DIR...`: fit the constants of stack
mlperf-harness (this project's implementations) on the user's own finished runs of that system,
and store them where later plans of the system find them.

From each run folder (results/runs/<bench>/<system>/<id>/): plan.json (config and layout), the
MLPerf log (run_start/run_stop, eval_start/eval_stop) and timings.jsonl (per step: step_time_s,
data_wait_s). Per run four measurements: the mean steady step time (a mean, as time-to-train
sums the steps, slow ones included), the mean evaluation time, the mean data wait and the
time-to-train itself; the model (harness.planner.timing, impl 'harness') predicts each.
The fit is least squares in log space with a pull towards the shipped constants
(data/efficiency.yaml `harness`): `time_scale` (this machine's speed against the one the shipped
constants came from) is nearly free, the others (compute efficiency, per-microbatch, per-step and
per-evaluation overheads, collective latency, data time per sample) move only as far as the runs
tell them apart. One run therefore mostly sets the machine's speed; runs of several layouts
(micro-batches, TP, processes) set the split. Tiny runs also give samples to converge.

Stored as YAML: ~/.cache/mlperf-harness/calibration/<system>.yaml ($MLPERF_CALIBRATION_DIR
overrides the folder), or --out FILE; written atomically.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from benchmarks.costs import Workload
from harness.core.errors import ConfigError
from harness.planner import calibration as C
from harness.planner import memory as M
from harness.planner import stacks as S
from harness.planner import timing as T
from harness.planner import workloads as W
from harness.planner.params import cost

if TYPE_CHECKING:
    from benchmarks.benchmark import Benchmark

# (key, per benchmark?, prior weight): weight = how strongly the runs must argue to move it
FREE = (
    ("time_scale", False, 0.02),
    ("mfu", True, 0.5),
    ("microbatch_overhead_s", True, 0.5),
    ("step_overhead_s", True, 0.5),
    ("eval_overhead_s", True, 0.5),
    ("data_s_per_sample", True, 0.5),
    ("coll_latency_s", False, 0.5),
    ("checkpoint_s", True, 0.5),
)
WARMUP_STEPS = 3  # the first steps build caches and pay allocator growth


def folder() -> Path:
    return Path(
        os.environ.get("MLPERF_CALIBRATION_DIR", Path.home() / ".cache" / "mlperf-harness" / "calibration")
    )


def load(system: str, path: str | None = None) -> dict | None:
    """The calibration of `system` (or the file given), or None; ConfigError when unreadable."""
    p = Path(path) if path else folder() / f"{system}.yaml"
    if not p.exists():
        if path:
            raise ConfigError(f"--calibration {path}: no such file")
        return None
    try:
        d = yaml.safe_load(p.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"{p}: not a calibration file ({e}); rerun --calibrate") from None
    if not isinstance(d, dict) or "constants" not in d:
        raise ConfigError(f"{p}: not a calibration file (no 'constants'); rerun --calibrate")
    if d.get("system") != system:
        raise ConfigError(f"{p}: calibrated for system '{d.get('system')}', not '{system}'")
    return {**d, "path": str(p)}


def read_timings(path: Path) -> list[dict]:
    from harness.core.runfolder import read_timings as read

    return read(path)


def read_events(path: Path) -> list[dict]:
    from harness.core.mllog_reader import read_events as read

    return read(path) if Path(path).exists() else []


@dataclass
class Run:
    path: str
    plan: object
    workload: Workload
    hw: object
    step_s: float
    eval_s: float | None
    data_s: float
    steps: int
    evals: int
    ttt_s: float | None
    success: bool


def read_run(run_dir: str, bench: Benchmark, hw) -> Run:
    from harness.core.runplan import RunPlan

    d = Path(run_dir)
    if not (d / "plan.json").exists():
        raise ConfigError(f"{d}: not a run folder (no plan.json); give results/runs/<bench>/<system>/<id>")
    try:
        rp = RunPlan.load(d / "plan.json")
    except (ValueError, OSError) as e:  # pydantic's ValidationError is a ValueError
        raise ConfigError(
            f"{d / 'plan.json'}: not a plan this harness can read ({str(e).splitlines()[0]})"
        ) from None
    if rp.benchmark != bench.name:
        raise ConfigError(f"{d}: a {rp.benchmark} run, not {bench.name}")
    if rp.submission.system != hw.name:
        raise ConfigError(f"{d}: a run on system '{rp.submission.system}', not '{hw.name}'")
    rows = read_timings(d / "timings.jsonl")
    steady = rows[WARMUP_STEPS:] or rows
    if not steady:
        raise ConfigError(f"{d}: no timings.jsonl rows (the run made no step)")
    ev = read_events(Path(rp.log_path) if Path(rp.log_path).exists() else d / "mlperf.log")
    at = {}
    for e in ev:
        at.setdefault(e["key"], []).append(e)
    evals = [b["time_ms"] - a["time_ms"] for a, b in zip(at.get("eval_start", []), at.get("eval_stop", []))]
    stop = (at.get("run_stop") or [{}])[-1]
    ttt = None
    if "run_start" in at and stop:
        ttt = (stop["time_ms"] - at["run_start"][0]["time_ms"]) / 1000
    lay = rp.layout
    run_hw = replace(hw, nodes=lay.nodes, per_node=lay.procs_per_node)
    return Run(
        path=str(d),
        plan=rp,
        workload=W.get(bench, bench.typed(rp.config), rp.size),
        hw=run_hw,
        step_s=statistics.mean(r["step_time_s"] for r in steady),
        eval_s=statistics.mean(evals) / 1000 if evals else None,
        data_s=statistics.mean(r.get("data_wait_s") or 0.0 for r in steady),
        steps=len(rows),
        evals=len(evals),
        ttt_s=ttt,
        success=(stop.get("metadata") or {}).get("status") == "success",
    )


def _candidate(run: Run, k: dict) -> M.Candidate:
    from harness.planner.search import _candidate, policy

    lay = run.plan.layout
    pol = policy(run.workload, run.hw, S.make("mlperf-harness"), k)
    return _candidate(
        pol, tp=lay.tp, pp=lay.pp, vp=lay.vp, cp=lay.cp, mbs=lay.micro_batch_size, gbs=lay.global_batch_size
    )


def predicted(run: Run, k: dict) -> dict:
    """The model's step, evaluation and data seconds for one run."""
    c = _candidate(run, k)
    parts = T.step(run.workload, c, run.hw, k)
    scale = k.get("time_scale", 1.0)
    lay = run.plan.layout
    _, per_eval = run.workload.cost.evals(run.workload, lay.global_batch_size, lay.global_batch_size)
    one_eval = (
        T.bench_value(k, "eval_overhead_s", run.workload.name)
        + T._eval_work(run.workload, c, run.hw, k, per_eval)
    ) * scale
    data = (
        lay.micro_batch_size
        * lay.grad_accum
        * T.bench_value(k, "data_s_per_sample", run.workload.name)
        * scale
    )
    ttt = (
        run.steps * sum(parts.values()) + run.evals * one_eval + T._checkpoints(run.workload, c, k, run.steps)
    )
    return {"step_s": sum(parts.values()), "eval_s": one_eval, "data_s": data, "time_to_train_s": ttt}


def _names(bench: Benchmark) -> list[tuple[str, str | None, float]]:
    """(constant, the benchmark's key under it or None, prior weight) of every free constant."""
    return [(key, bench.name if per else None, w) for key, per, w in FREE]


def fit_runs(runs: list[Run], bench: Benchmark, prior: dict) -> dict:
    """The harness constants fitted on `runs` of `bench` (a flat constants dict)."""
    import numpy as np
    from scipy.optimize import least_squares

    names = _names(bench)

    def get(k, key, sub):
        v = k.get(key, 1.0 if key == "time_scale" else 0.0)
        return float(v.get(sub, 0.0)) if isinstance(v, dict) else float(v)

    x0 = np.array([max(get(prior, key, sub), 1e-9) for key, sub, _ in names])

    def consts(x):
        k = dict(prior)
        for (key, sub, _), v in zip(names, x):
            k[key] = {**k.get(key, {}), sub: float(v)} if sub else float(v)
        return k

    def residuals(lx):
        k = consts(np.exp(lx))
        r = []
        for run in runs:
            p = predicted(run, k)
            r.append(math.log(p["step_s"] / run.step_s))
            if run.eval_s:
                r.append(math.log(p["eval_s"] / run.eval_s))
            if run.data_s > 0 and p["data_s"] > 0:
                r.append(math.log(p["data_s"] / run.data_s))
            if run.ttt_s:  # what is predicted in the end: steps, evaluations and the gaps between them
                r.append(math.log(p["time_to_train_s"] / run.ttt_s))
        r += [w * (a - b) for (_, _, w), a, b in zip(names, lx, np.log(x0))]
        return np.array(r)

    res = least_squares(residuals, np.log(x0), method="trf", x_scale=1.0, max_nfev=400)
    return consts(np.exp(res.x))


def calibrate(bench: Benchmark, system: str, hw, run_dirs: list[str], out: str | None) -> dict:
    if not run_dirs:
        raise ConfigError("--calibrate needs at least one RUN_DIR (results/runs/<bench>/<system>/<id>)")
    cost(bench)  # a benchmark without a cost model: its one line before any run folder is read
    runs = [read_run(d, bench, hw) for d in run_dirs]
    prior, _ = C.for_prediction(bench.name, hw, S.make("mlperf-harness"))
    k = fit_runs(runs, bench, prior)
    keep = {key for key, _, _ in FREE}
    constants = {key: (dict(v) if isinstance(v, dict) else v) for key, v in k.items() if key in keep}
    doc: dict = {
        "system": system,
        "stack": "mlperf-harness",
        "benchmark": bench.name,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "constants": constants,
        "runs": [],
    }
    for run in runs:
        p = predicted(run, k)
        lay = run.plan.layout
        doc["runs"].append(
            {
                "run_dir": run.path,
                "layout": lay.describe(),
                "measured": {
                    "step_s": run.step_s,
                    "eval_s": run.eval_s,
                    "data_s": run.data_s,
                    "time_to_train_s": run.ttt_s,
                },
                "fitted": {key: round(v, 6) for key, v in p.items()},
            }
        )
    tiny = [r for r in runs if r.plan.size == "tiny" and r.success]
    if tiny:
        gbs = tiny[0].plan.layout.global_batch_size
        same = [r.steps * gbs for r in tiny if r.plan.layout.global_batch_size == gbs]
        doc["tiny"] = {bench.name: {"samples": float(statistics.mean(same)), "gbs": gbs, "runs": len(same)}}
    path = Path(out) if out else folder() / f"{system}.yaml"
    _atomic_write(path, yaml.safe_dump(doc, sort_keys=False))
    doc["path"] = str(path)
    return doc


def _atomic_write(path: Path, text: str) -> None:
    from harness.core.files import atomic_write

    try:
        atomic_write(path, text)
    except OSError as e:
        raise ConfigError(f"{path}: cannot write ({e.strerror})") from None
