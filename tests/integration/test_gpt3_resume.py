"""Tiny GPT-3, 2 ranks under torchrun: kill -9 of the whole `mlperf run` mid-training, then
`mlperf run gpt3 --resume RUN_DIR`: the resumed curve equals the uninterrupted run's, the
interruption is on the record, and no step's data is seen twice beyond what the resume point implies.

The kill -9 run shards megatron's distributed optimizer over DP=2 with the grad reduce-scatter and
param all-gather overlapped (gpt3_helpers.DP2_SETS), so its checkpoint is dist_checkpointing's
sharded state with each rank's half of the master weights and Adam moments; the resumed curve
must equal the uninterrupted run's (gpt3_helpers.dp2_distopt_run, the same command and seed) at
every eval after the resume point, to RESUME_RTOL. Both are the same arithmetic in the same order
on the same layout, so they agree bit for bit when the state is complete (measured: equal to the
last digit); 1e-5 is the issue's bound for fp32. A resume that restarts Adam (moments or step
lost) moves the next eval by ~1e-3.

The killed run and its uninterrupted reference stop at RESUMED_STEPS (`max_steps` in DP2_SETS: the
loop ends, the data order stays), so the resume covers the 2 evals after the checkpoint instead of
the 3 to the target: the first eval
after a resume is where a lost state shows (above). A resume that goes on to the target, with the
official checker on the resumed log: test_gnn_tiny."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from gpt3_helpers import (
    CHECKPOINT_STEPS,
    DP2_SETS,
    DP2_STEPS,
    EVAL_STEPS,
    REPO,
    dp2_distopt_run,
    env,
    events,
    prepared_data_dir,
)
from helpers import (
    assert_resumed_curve_matches,
    kill_after_first_checkpoint,
    mlperf_argv,
    one_run_args,
    resume_run,
)

from harness.core.mllog_reader import read_events


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return prepared_data_dir(tmp_path_factory)


pytestmark = pytest.mark.slow  # trains or starts rank processes: not in the -m 'not slow' loop

RESUME_RTOL = 1e-5
# DP2_SETS stop at DP2_STEPS (max_steps): checkpoint at CHECKPOINT_STEPS (36), killed after the
# eval at 48, then the evals at 48 and 60 are the resumed ones.
RESUMED_STEPS = DP2_STEPS


def _start_tp2_run(results: Path, data_dir: Path, seed: int):
    """`mlperf run gpt3` with 2 ranks (TP=2) under torchrun, in the background. The LR is ~0, so
    the run cannot reach the target before the signal comes (a run that finished first, as one
    under xdist once did, exits 0 and proves nothing about Ctrl-C)."""
    extra = [
        "--nproc-per-node",
        "2",
        "--set",
        "tensor_model_parallel_size=2",
        "--set",
        "opt_base_learning_rate=1e-9",
    ]
    argv = mlperf_argv(*one_run_args("gpt3", results, data_dir, seed, *extra))
    return subprocess.Popen(
        argv, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_kill9_mid_training_then_resume(tmp_path, tmp_path_factory, data_dir):
    results = tmp_path / "results"
    extra = ["--nproc-per-node", "2", *(a for s in DP2_SETS for a in ("--set", s))]
    argv = mlperf_argv(*one_run_args("gpt3", results, data_dir, 3, *extra))

    def one_eval_past_the_checkpoint(run: Path) -> bool:
        """One checkpoint (step 36) plus one more eval logged after it: redone work to discard."""
        if not (run / "checkpoints" / f"step_{CHECKPOINT_STEPS:08d}").exists():
            return False
        done = read_events(run / "mlperf.log")  # tolerant of a half-written last line
        redo = (CHECKPOINT_STEPS + EVAL_STEPS) * 16 * 64
        return any(e["key"] == "eval_accuracy" and e["metadata"]["epoch_num"] == redo for e in done)

    # The whole tree: torch elastic starts each rank in a session of its own, so killing
    # torchrun's process group would leave the ranks training.
    run, tree = kill_after_first_checkpoint(
        argv, results / "runs" / "gpt3" / "cpu-local", deadline_s=240, ready=one_eval_past_the_checkpoint
    )
    assert len(tree) >= 3, tree  # torchrun + 2 ranks
    log = run / "mlperf.log"
    before = log.read_bytes()
    assert b'"run_stop"' not in before
    org_results = list(results.glob("*/results/cpu-local/gpt3/result_*.txt"))
    assert org_results == []  # an interrupted run is never claimed: it never looks complete
    pre = [e for e in events(log) if e["key"] == "eval_accuracy"]
    # Each rank wrote its shards of the model and optimizer into the step folder, in the manifest.
    ckpt = run / "checkpoints" / f"step_{CHECKPOINT_STEPS:08d}"
    files = json.loads((ckpt / "manifest.json").read_text())["files"]
    shards = [f for f in files if f.startswith("sharded/") and f.endswith(".distcp")]
    assert {f.split("__")[1].split("_")[0] for f in shards} == {"0", "1"}, sorted(files)

    run_record = resume_run("gpt3", run, ok=(3,))  # stopped at max_steps: "target not reached"
    assert run_record["status"] == "aborted" and run_record["result_file"].endswith("result_0.txt")

    ev = events(log)
    keys = [e["key"] for e in ev]
    assert keys.count("run_start") == keys.count("run_stop") == keys.count("harness_resumed") == 1
    resumed = ev[keys.index("harness_resumed")]
    step = resumed["value"]
    assert step >= CHECKPOINT_STEPS and step % EVAL_STEPS == 0
    acc = [e for e in ev if e["key"] == "eval_accuracy"]
    assert acc[-1]["metadata"]["epoch_num"] == RESUMED_STEPS * 16 * 64
    points = [e["metadata"]["epoch_num"] for e in acc]
    assert points == sorted(set(points))  # no evaluation logged twice
    # Exact continuation: an eval the kill discarded comes out the same after the resume (the
    # same data, optimizer, schedule and RNG state), and so does the whole curve to the target.
    redone = {e["metadata"]["epoch_num"]: e["value"] for e in acc}
    for e in pre:
        if e["metadata"]["epoch_num"] > step * 16 * 64:
            assert redone[e["metadata"]["epoch_num"]] == pytest.approx(e["value"], rel=RESUME_RTOL)
    # The reference only now: the other worker can be making it meanwhile (once_per_run).
    reference_log = dp2_distopt_run(tmp_path_factory, data_dir)["runs"][0]["log"]
    assert assert_resumed_curve_matches(run, reference_log, rel=RESUME_RTOL) == 2
    plan = json.loads((run / "plan.json").read_text())
    assert plan["layout"]["dp"] == 2 and plan["config"]["distributed_optimizer"]
    assert plan["config"]["overlap_grad_reduce"] and plan["config"]["overlap_param_gather"]
    # The log before the checkpoint is intact; time-to-train counts from the original run_start.
    record = json.loads((run / "resume.json").read_text())["resumes"][-1]
    tail = (run / record["discarded_file"]).read_bytes()
    assert before.endswith(tail) and log.read_bytes().startswith(before[: len(before) - len(tail)])
    assert "eval_accuracy" in record["discarded_keys"]
    assert resumed["metadata"]["lost_ms"] > 0
    # Data: steps are a pure function of the step number (train_microbatches); each step ran once
    # except the ones after the checkpoint that the kill undid.
    rows = [json.loads(x) for x in (run / "timings.jsonl").read_text().splitlines()]
    steps = [x["step"] for x in rows]
    cut = [i for i, s in enumerate(steps) if s == step + 1][-1]  # the resumed attempt's first row
    first, second = steps[:cut], steps[cut:]
    assert first == list(range(1, len(first) + 1)) and second == list(range(step + 1, step + 1 + len(second)))
    assert set(first) & set(second) == set(range(step + 1, len(first) + 1))
    assert steps[-1] == RESUMED_STEPS


def test_sigint_to_mlperf_run_stops_at_a_step_boundary(tmp_path, data_dir):
    """Ctrl-C of `mlperf run` (2 ranks under torchrun): the ranks stop at the next step boundary,
    rank 0 logs run_stop aborted itself, the result is claimed as aborted, and the exit is 130."""
    results = tmp_path / "results"
    cli = _start_tp2_run(results, data_dir, seed=4)
    runs = results / "runs" / "gpt3" / "cpu-local"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and cli.poll() is None:
        logs = list(runs.glob("*/mlperf.log")) if runs.exists() else []
        if logs and any(e["key"] == "eval_accuracy" for e in read_events(logs[0])):
            break
        time.sleep(0.05)
    time.sleep(0.3)  # mid-block
    cli.send_signal(signal.SIGINT)
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 130, out + err
    assert "interrupted" in err
    run = logs[0].parent
    ev = events(logs[0])
    keys = [e["key"] for e in ev]
    assert keys.count("run_stop") == 1 and keys[-1] == "run_stop"
    assert ev[-1]["metadata"]["status"] == "aborted" and "error" not in ev[-1]["metadata"]  # by rank 0
    assert keys[-2] == "block_stop"  # the block was closed at a step boundary, no eval after it
    steps = [json.loads(x)["step"] for x in (run / "timings.jsonl").read_text().splitlines()]
    assert steps == list(range(1, len(steps) + 1))
    (res,) = list(results.glob("*/results/cpu-local/gpt3/result_*.txt"))
    assert events(res)[-1]["metadata"]["status"] == "aborted"
    assert "exitcode  : -9" not in (run / "stdout.log").read_text()  # no rank had to be killed
