"""llama2_70b_lora context parallelism on CPU: 2 gloo ranks at CP 2 train as one process at CP 1.

Both start from the same prepared base, seed and batches (tests/integration/llama2_cp_worker.py:
train.Mesh, train.build, train.train_step, train.evaluate, as train.run calls them). At CP 2 each
rank holds chunks r and 3 - r of every 96-token sequence, K/V are all-gathered, the token count
is summed over CP, and FSDP averages the LoRA gradients over both ranks. Per step the loss and
the gradient norm, then one evaluation, must equal CP 1's to RTOL.

Measured (seed 5, 4 steps, every next token scored: see the worker): relative differences
<= 1.4e-7 in the loss, <= 9.0e-7 in the gradient norm (step 3), 2.8e-9 in the eval loss. Only
the fp32 summation order differs (the K/V gradients reduce-scattered, FSDP's sums over 2 ranks,
an explicit mask instead of SDPA's is_causal), so RTOL is 1e-5. A planted fault is far above it:
the token count not summed over CP (each rank divides by its own count) moved every loss and
gradient norm by ~100 % (the eval after 4 steps by 1.2e-4). (With the answer-only labels that
fault passed: every tiny answer lies in chunk 3, held by rank 0.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, env, make_plan, plan_file, prepared_once

pytestmark = pytest.mark.slow

RTOL = 1e-5
WORKER = Path(__file__).with_name("llama2_cp_worker.py")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return prepared_once(tmp_path_factory, "llama2-data", "llama2_70b_lora")


def _start(tmp_path: Path, data: Path, nproc: int, cp: int) -> tuple[subprocess.Popen, Path]:
    plan = make_plan(
        "llama2_70b_lora",
        tmp_path / f"cp{cp}",
        seed=5,
        sets=[f"context_parallel_size={cp}"],
        nproc_per_node=nproc,
        data_dir=data,
    )
    assert (plan.layout.cp, plan.layout.dp, plan.layout.world_size) == (cp, 1, nproc)
    assert plan.disclosure["context_parallelism"] == cp  # the 6.1.0 key the log carries
    out = tmp_path / f"cp{cp}.json"
    run = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    argv = [sys.executable, *run, str(WORKER), str(plan_file(plan)), str(out)]
    proc = subprocess.Popen(
        argv, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    return proc, out


def test_cp2_over_gloo_equals_one_process_step_by_step(tmp_path, data):
    started = [_start(tmp_path, data, 1, 1), _start(tmp_path, data, 2, 2)]
    docs = []
    for proc, out in started:  # both at once: each is mostly start-up, on one thread per rank
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stdout[-2000:] + stderr[-3000:]
        docs.append(json.loads(out.read_text()))
    one, cp2 = docs
    assert len(one["loss"]) == 4
    for key in ("loss", "grad_norm"):
        assert cp2[key] == pytest.approx(one[key], rel=RTOL), key
    assert cp2["eval"] == pytest.approx(one["eval"], rel=RTOL)
    assert one["loss"][0] != one["loss"][-1]  # it trained: the later steps compare updated weights


def test_cp2_kill9_after_first_checkpoint_resume_equals_the_uninterrupted_run(tmp_path, data):
    """`mlperf run` at CP 2 killed (kill -9, the whole tree) right after its first checkpoint, then
    `--resume`: every eval after the resume point equals the uninterrupted CP 2 run's (both
    stopped at step 96 by `max_steps`, which leaves the data order alone), as the DP 2 resume test
    in test_llama2_tiny.py. The checkpoint is FSDP over both ranks, as at DP 2; what CP adds is
    that both ranks read the same sequences (a resumed batch order that restarted at step 0 on one
    rank, or RNG state not restored per rank, would move the first eval after the resume)."""
    from helpers import (
        assert_resumed_curve_matches,
        kill_after_first_checkpoint,
        mlperf_argv,
        one_run_args,
        resume_run,
    )

    cp2 = ("--nproc-per-node", "2", "--set", "context_parallel_size=2", "--set", "max_steps=96")
    whole = subprocess.run(
        mlperf_argv(*one_run_args("llama2_70b_lora", tmp_path / "whole", data, 5, *cp2)),
        cwd=REPO,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert whole.returncode == 3, whole.stderr[-3000:]  # stopped at max_steps, short of the target
    (ref,) = json.loads(whole.stdout)["runs"]
    results = tmp_path / "killed"
    argv = mlperf_argv(*one_run_args("llama2_70b_lora", results, data, 5, *cp2))
    run, killed = kill_after_first_checkpoint(argv, results / "runs" / "llama2_70b_lora" / "cpu-local")
    assert len(killed) >= 3  # torchrun + 2 ranks
    record = resume_run("llama2_70b_lora", run, ok=(3,))
    assert record["status"] == "aborted", record
    assert assert_resumed_curve_matches(run, Path(ref["log"]), rel=1e-5) == 5  # both stopped at 96
