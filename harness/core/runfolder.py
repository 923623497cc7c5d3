"""The files of one run folder, `results/runs/<benchmark>/<system>/<run id>/`, and how to read them.

    plan.json          the RunPlan every rank was started with
    mlperf.log         the MLPerf log (rank 0), claimed as result_<i>.txt when the run ends
    timings.jsonl      one JSON line per optimizer step (rank 0), schema TIMINGS_COLUMNS
    routing.jsonl      MoE models: tokens per expert of each layer, one line per evaluation
                       (rank 0; reference_impls/megatron_gpt/routing.py)
    checkpoints/       step_<N>/ folders (checkpoint_manifest.py)
    resume.json        one record per `mlperf run --resume` (newest last)
    ranks.json         where each rank ran: rank, local rank, node id, hostname (rank 0, at start)
    host_load.json     the host's load average and core count at the start and end of the run
                       (rank 0; `mlperf diagnose` says when other work shared the host)
    job.sbatch, slurm_job_id, exit_code   Slurm runs: the allocation's script, its job id, and
                       the run's exit code as the job script recorded it
    stdout.log, stderr.log, prepare.log   the processes' output

The run folder sits outside the `<org>` submission folder, so the official package checker never
sees it. Torch-free: the CLI (resume, diagnose, plan --calibrate) and the ranks both read it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

PLAN_FILE = "plan.json"
LOG_FILE = "mlperf.log"
TIMINGS_FILE = "timings.jsonl"
ROUTING_FILE = "routing.jsonl"  # MoE models: tokens per expert at each evaluation (rank 0)
CHECKPOINT_DIR = "checkpoints"
RESUME_FILE = "resume.json"
RANKS_FILE = "ranks.json"
HOST_LOAD_FILE = "host_load.json"
EXIT_CODE_FILE = "exit_code"
LR_FIND_REQUEST = "lr_find_request.json"  # `mlperf lr-find` -> the sweep: {"steps", "min_lr", "max_lr"}
LR_FIND_RAW = "lr_find_raw.json"  # the sweep (rank 0) -> `mlperf lr-find`: its raw curve
OUTPUT_FILES = ("stdout.log", "stderr.log", "prepare.log")

# timings.jsonl: one row per optimizer step, written by every benchmark's loop on rank 0.
TIMINGS_COLUMNS = {
    "step": "optimizer steps completed in this run (1-based; a resumed run repeats the steps after its checkpoint)",
    "step_time_s": "wall time of the step, data loading included",
    "data_wait_s": "part of step_time_s spent waiting for the step's batch",
    "samples": "samples (sequences, graph nodes, images) the step consumed over all ranks",
    "samples_per_s": "samples / step_time_s",
    "loss": "training loss of the step where it was read anyway (at evaluations), else null",
    "max_rss_mb": "peak resident memory of rank 0's process so far",
}


def results_root(run_dir: str | Path) -> Path:
    """results/runs/<benchmark>/<system>/<id> -> results"""
    return Path(run_dir).resolve().parents[3]


def checkpoint_root(run_dir: str | Path) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR


def jsonl_rows(text: str, ok: Callable[[Any], bool]) -> list:
    """The lines of a run's JSON-lines side file that parse and pass `ok`, in order; a torn last
    line of a killed run, or an edited or foreign one, is skipped."""
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:  # JSONDecodeError, or an integer over Python's 4,300-digit limit
            continue
        if ok(row):
            rows.append(row)
    return rows


def read_timings(path: str | Path) -> list[dict]:
    """The rows of a timings.jsonl, one per step (for a step logged twice, by an interrupted
    attempt and its resume, the last row counts); torn or foreign lines are skipped."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return []
    rows = jsonl_rows(text, _timings_row_ok)
    by_step: dict = {}
    for r in rows:
        by_step[r["step"]] = r
    return [by_step[k] for k in sorted(by_step)]


_LIMIT = 1e15  # beyond any step count, second, sample or megabyte figure a run writes


def _timings_row_ok(row) -> bool:
    """A row as harness/train/timings.py writes it: a whole step number and finite numbers (or
    null; the loss any float, as a diverging run writes 1e21 or NaN) in the columns. An edited or foreign row (a string or list step, a 400-digit time, NaN)
    is skipped like a torn line rather than reaching the readers' arithmetic."""
    if not isinstance(row, dict):
        return False
    step = row.get("step")
    if type(step) is not int or not 0 <= step < _LIMIT:
        return False
    for key in TIMINGS_COLUMNS:
        v = row.get(key)
        if key == "step" or (v is None and key != "step_time_s"):
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):  # bool is an int: not a number here
            return False
        if key == "loss":
            continue  # any float: a diverging run's loss is 1e21, then inf/NaN (diagnose reads it)
        if not abs(v) < _LIMIT:  # also False for NaN
            return False
    return True


def resume_history(run_dir: str | Path) -> list[dict]:
    """The resume records of a run folder, oldest first ([] when it was never resumed)."""
    p = Path(run_dir) / RESUME_FILE
    if not p.exists():
        return []
    try:
        return json.loads(p.read_text())["resumes"]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def resume_marker(run_dir: str | Path) -> dict:
    """The newest resume record (what the resumed process logs as `harness_resumed`)."""
    h = resume_history(run_dir)
    return h[-1] if h else {"checkpoint_step": None}
