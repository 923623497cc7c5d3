"""Shared by the gpt3 integration tests: one prepared tiny data dir per pytest session, plans
from the harness's own planner, and the official checker with the tiny rules (tests/helpers.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import helpers
from helpers import REPO, env, events, official_check  # noqa: F401  (the gpt3 tests import them from here)


def make_plan(tmp_path: Path, data_dir: Path, seed: int, nproc: int | None = None, sets=()):
    return helpers.make_plan(
        "gpt3", tmp_path, runs=1, seed=seed, sets=list(sets), nproc_per_node=nproc, data_dir=data_dir
    )


def prepared_data_dir(tmp_path_factory, sets=()) -> Path:
    """Prepare once per session per model shape (shared by every gpt3 test module; ~10 s)."""
    name = "gpt3-tiny-data" + "".join(f"-{s.replace('=', '')}" for s in sets)
    data_dir = tmp_path_factory.getbasetemp() / name
    plan = make_plan(tmp_path_factory.getbasetemp() / f"{name}-prepare", data_dir, seed=0, sets=sets)
    from reference_impls.gpt3 import manifest

    if not manifest.is_prepared(plan):
        r = helpers.run_entry("reference_impls.gpt3", plan, env=env(), task="prepare")
        assert r.returncode == 0, r.stderr[-3000:]
    return data_dir


# The switches of NVIDIA's record layouts that a CPU runs (benchmarks/gpt3/configs/dgx-h100x64.yaml),
# at TP=2 on 2 ranks: the command of issue 12's done-when.
RECORD_SETS = ("tensor_model_parallel_size=2", "sequence_parallel=true", "distributed_optimizer=true")


def record_layout_run(tmp_path_factory, data_dir: Path) -> dict:
    """`mlperf run gpt3 ... RECORD_SETS` to the target, seed 3, once per session (the layout test
    checks it; the resume test compares its interrupted run with it). Returns the CLI's JSON."""
    root = tmp_path_factory.getbasetemp() / "gpt3-record-layout"
    done = root / "run.json"
    extra = ["--nproc-per-node", "2", *(a for s in RECORD_SETS for a in ("--set", s))]
    if not done.exists():
        r = subprocess.run(
            helpers.mlperf_argv(*helpers.one_run_args("gpt3", root / "results", data_dir, 3, *extra)),
            cwd=REPO, env=env(), capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
        done.write_text(r.stdout)
    return json.loads(done.read_text())


def eval_curve(log_path) -> dict[int, float]:
    """epoch_num (tokens) -> eval_accuracy (log-perplexity) of a log."""
    return {e["metadata"]["epoch_num"]: e["value"] for e in events(log_path) if e["key"] == "eval_accuracy"}


def train(plan, nproc: int = 1, timeout: float = 600):
    return helpers.run_entry("reference_impls.gpt3", plan, nproc=nproc, timeout=timeout, env=env())


def check_tiny_run(run_dir: Path) -> None:
    """What a successful tiny gpt3 run's folder must hold: the prologue before run_start, evals at
    every `eval_interval` steps down to the target, one block per eval, a log that passes the
    official checker, and one timings row per step (loss at the eval points)."""
    import json

    from harness.core.runplan import RunPlan

    plan = RunPlan.load(Path(run_dir) / "plan.json")
    ev = events(plan.log_path)
    keys = [e["key"] for e in ev]
    # Prologue order (harness/core/mllog.py) and the gpt3 keys of closed_gpt3.yaml.
    assert keys.index("submission_division") < keys.index("init_stop") < keys.index("run_start")
    for k in (
        "train_samples",
        "eval_samples",
        "init_checkpoint_step",
        "opt_learning_rate_decay_steps",
        "opt_weight_decay",
        "gradient_accumulation_steps",
        "max_sequence_length",
    ):
        assert keys.index(k) < keys.index("init_stop"), k
    acc = [e for e in ev if e["key"] == "eval_accuracy"]
    seq, gbs = plan.config["max_sequence_length"], plan.config["global_batch_size"]
    every = -(-plan.config["eval_interval_samples"] // gbs)
    assert [e["metadata"]["epoch_num"] for e in acc] == [every * gbs * seq * (i + 1) for i in range(len(acc))]
    assert acc[-1]["value"] <= plan.target["log_perplexity"] < acc[0]["value"]
    assert ev[-1]["key"] == "run_stop" and ev[-1]["metadata"]["status"] == "success"
    assert keys.count("block_start") == keys.count("block_stop") == len(acc)
    c = official_check(plan.log_path)
    assert c.returncode == 0, c.stdout + c.stderr
    rows = [json.loads(x) for x in (Path(run_dir) / "timings.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, len(rows) + 1)) and len(rows) == every * len(acc)
    assert all(r["step_time_s"] > 0 and r["max_rss_mb"] > 0 for r in rows)
    assert [r["step"] for r in rows if r["loss"] is not None] == [every * (i + 1) for i in range(len(acc))]
