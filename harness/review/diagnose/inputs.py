"""What `mlperf diagnose` reads about one run: the MLPerf log, the per-step timings side file
(`timings.jsonl`: step, step_time_s, data_wait_s, samples_per_s, loss, max_rss_mb), MoE models'
tokens per expert (`routing.jsonl`, one line per evaluation), the process output
(stdout.log/stderr) and the plan when there is one. Torch-free; never raises on contents.

A RUN_DIR (results/runs/<bench>/<system>/<id>) has all of them. A LOG may be the run's own
mlperf.log or a claimed `result_<i>.txt`; the latter is a hard link of the run's log, so its run
folder is found by inode under `<results>/runs/`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import ConfigError
from harness.core.files import open_input, refuse_special
from harness.core.mllog_reader import read_events
from harness.core.runfolder import OUTPUT_FILES, ROUTING_FILE, jsonl_rows, read_timings
from harness.core.tree import load_system
from harness.review.diagnose import host


@dataclass
class RunData:
    source: str
    run_dir: Path | None
    log_path: Path | None
    events: list[dict] = field(default_factory=list)
    timings: list[dict] = field(default_factory=list)
    output: str = ""
    """Tail of the processes' output (for crash signatures such as out-of-memory)."""
    plan: object | None = None
    notes: list[str] = field(default_factory=list)
    accelerators: int | None = None
    """Accelerators the run used: the system JSON of a submission tree, the plan, or --accelerators."""
    accelerator: str | None = None
    """Accelerator model: the system JSON's accelerator_model_name, or --accelerator."""
    processes: int | None = None
    """Processes that trained (diagnose/host.py): 1 means no collectives; None: unknown."""
    host: dict | None = None
    """The load average beside the run (host_load.json; diagnose/host.py), None where not recorded."""
    routing: list[dict] = field(default_factory=list)
    """routing.jsonl's lines (MoE models: tokens per expert of each layer per eval interval), oldest first."""

    def first(self, key: str, default=None):
        for e in self.events:
            if e.get("key") == key:
                return e.get("value")
        return default

    @property
    def benchmark(self) -> str | None:
        return self.plan.benchmark if self.plan else self.first("submission_benchmark")

    @property
    def stop_status(self) -> str | None:
        for e in self.events:
            if e.get("key") == "run_stop":
                return e.get("metadata", {}).get("status")
        return None

    @property
    def stop_metadata(self) -> dict:
        for e in self.events:
            if e.get("key") == "run_stop":
                return e.get("metadata", {})
        return {}

    def evals(self) -> list[tuple[float, float]]:
        """(progress, value) of every eval_accuracy before run_stop."""
        out = []
        for e in self.events:
            if e.get("key") == "run_stop":
                break
            if e.get("key") == "eval_accuracy":
                md = e.get("metadata", {})
                prog = md.get("epoch_num", md.get("samples_count", len(out)))
                v = e.get("value")
                try:
                    out.append((float(prog), float(v)))
                except (TypeError, ValueError):
                    out.append((float(len(out)), math.nan))
        return out


def _tail(path: Path, limit: int = 200_000) -> str:
    try:
        with open_input(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _run_dir_of_result(log: Path) -> Path | None:
    """results/<org>/results/<system>/<bench>/result_<i>.txt -> its run folder (same inode)."""
    try:
        if log.stat().st_nlink < 2:
            return None
        runs = log.resolve().parents[4] / "runs"
    except (OSError, IndexError):
        return None
    for cand in runs.glob("*/*/*/mlperf.log"):
        try:
            if os.path.samefile(cand, log):
                return cand.parent
        except OSError:
            continue
    return None


def _tree_system(log: Path) -> dict | None:
    """The system JSON of <org>/results/<system>/<benchmark>/result_<i>.txt, if there is one."""
    try:
        bench_dir = log.resolve().parent
        results = bench_dir.parent.parent
    except OSError:
        return None
    if results.name != "results":
        return None
    desc, _problem = load_system(str(results.parent), bench_dir.parent.name)
    return desc


def _accelerators(data: RunData, log: Path | None) -> None:
    desc = _tree_system(log) if log is not None else None
    if desc is not None:
        try:
            data.accelerators = int(desc.get("number_of_nodes")) * int(desc.get("accelerators_per_node"))
        except (TypeError, ValueError):
            pass
        data.accelerator = desc.get("accelerator_model_name") or None
    elif data.plan is not None:
        data.accelerators = data.plan.layout.world_size


def read_routing(path: Path) -> list[dict]:
    """The lines of a routing.jsonl (reference_impls/megatron_gpt/routing.py) with a step and a list
    of layers; torn or foreign lines are skipped. No file (dense models): []."""
    return jsonl_rows(  # _tail: "" when absent; a cut first line is skipped
        _tail(path, 2_000_000),
        lambda r: (
            isinstance(r, dict) and isinstance(r.get("step"), int) and isinstance(r.get("layers"), list)
        ),
    )


def load(target: str | Path, accelerators: int | None = None, accelerator: str | None = None) -> RunData:
    p = Path(target)
    if not p.exists():
        raise ConfigError(f"{p}: no such run folder or log")
    run_dir: Path | None
    if p.is_dir():
        run_dir, log = p, None
        if not (p / "plan.json").exists() and not (p / "timings.jsonl").exists():
            logs = sorted(p.glob("*.log")) + sorted(p.glob("result_*.txt"))
            if not logs:
                raise ConfigError(f"{p}: not a run folder (no plan.json, timings.jsonl or log)")
    else:
        refuse_special(p, "give a run folder or an MLPerf log")
        log = p
        run_dir = p.parent if (p.parent / "timings.jsonl").exists() else _run_dir_of_result(p)
    data = RunData(source=str(p), run_dir=run_dir, log_path=log)
    if run_dir is not None and (run_dir / "plan.json").exists():
        try:
            from harness.core.runplan import RunPlan

            data.plan = RunPlan.load(run_dir / "plan.json")
        except Exception as e:  # noqa: BLE001 - a bad plan only costs us the layout advice
            data.notes.append(f"plan.json unreadable ({type(e).__name__}); advice without the layout")
    if data.log_path is None and run_dir is not None:
        cand = Path(data.plan.log_path) if data.plan else run_dir / "mlperf.log"
        data.log_path = cand if cand.exists() else (run_dir / "mlperf.log")
    if data.log_path is not None and data.log_path.exists():
        refuse_special(data.log_path, "replace it with the run's MLPerf log")
        data.events = read_events(data.log_path)
    else:
        data.notes.append("no MLPerf log found")
    if run_dir is not None:
        data.timings = read_timings(run_dir / "timings.jsonl")
        data.output = "\n".join(_tail(run_dir / f) for f in OUTPUT_FILES if (run_dir / f).exists())
        data.routing = read_routing(run_dir / ROUTING_FILE)
    _accelerators(data, data.log_path)
    data.accelerators = accelerators or data.accelerators
    data.accelerator = accelerator or data.accelerator
    data.processes = host.processes(run_dir, data.plan, data.accelerators)
    data.host = host.load(run_dir)
    timings = run_dir / "timings.jsonl" if run_dir is not None else None
    if not data.events and not data.timings:
        read = [str(x) for x in (data.log_path, timings) if x is not None and x.is_file()]
        raise ConfigError(
            f"{p}: nothing to diagnose: "
            + (
                f"no MLPerf log line or timings row in {', '.join(read)}"
                if read
                else "no MLPerf log or timings"
            )
            + "; give a run folder (results/runs/<bench>/<system>/<id>) or an MLPerf log"
        )
    if not data.timings:
        garbled = timings is not None and timings.is_file() and timings.stat().st_size > 0
        data.notes.append(
            (f"{timings}: no readable row" if garbled else "no timings.jsonl")
            + ": step-level speed and data-loading checks skipped (MLLOG intervals used)"
        )
    return data
