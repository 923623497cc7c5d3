"""Tiny llama2_70b_lora end to end, as a user runs it: `mlperf run llama2_70b_lora --system
cpu-local --runs 1` prepares the synthetic data and base model on demand, fine-tunes LoRA to the
tiny target, and the log passes the official compliance checker with the tiny rules. With 2 ranks
(FSDP2 over gloo) the same, and a kill -9 + `--resume` that continues the uninterrupted run's curve."""

import json
from pathlib import Path

import pytest
from helpers import (
    assert_resumed_curve_matches,
    check_as_tree,
    events,
    kill_after_first_checkpoint,
    mlperf_argv,
    official_check,
    one_run_args,
    prepared_once,
    resume_run,
    uninterrupted_run,
)

from benchmarks import get

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """`mlperf prepare llama2_70b_lora` once per pytest run (the on-demand prepare inside `mlperf
    run` is the gpt3 quick start's test): every run here, on either xdist worker, reads it."""
    return prepared_once(tmp_path_factory, "llama2-data", "llama2_70b_lora")


def _run_one(mlperf, results: Path, data: Path, seed: int, *extra: str) -> dict:
    """`mlperf run llama2_70b_lora --system cpu-local --runs 1 ...`: its one run, which succeeded."""
    r = mlperf(*one_run_args("llama2_70b_lora", results, data, seed, *extra))
    assert r.returncode == 0, r.stderr[-3000:]
    run = json.loads(r.stdout)["runs"][0]
    assert run["status"] == "success"
    return run


def test_tiny_run_in_bf16_reaches_target_and_log_passes_tiny_rules(mlperf, tmp_path, data):
    """One process in bf16, the GPU configs' precision (the shipped tiny size is fp32, and the
    2-rank tests run it): seeds 1-5 reach 1.6 at 1,632-1,824 samples in bf16, 1,632-1,920 in
    fp32 (README), so the target is the bound, as for fp32."""
    res = tmp_path / "results"
    run = _run_one(mlperf, res, data, 5, "--set", "precision=bf16")  # bf16 seed 5: 1.6 at 1,728
    # What the model's parameters held (train.build prints it), not what the config asked for.
    out = (Path(run["run_dir"]) / "stdout.log").read_text()
    assert "llama2: frozen base torch.bfloat16, LoRA torch.float32" in out, out[-2000:]
    assert json.loads((data / "PREPARED.json").read_text())["facts"]["not_submittable"] is True
    log = Path(run["result_file"])
    chk = official_check(log)
    assert chk.returncode == 0, chk.stdout + chk.stderr

    ev = events(log)
    keys = [e["key"] for e in ev]
    # The prologue in harness/core/mllog.py's order, with the closed file's keys (literal lora_rank).
    order = [
        "cache_clear",
        "init_start",
        "submission_benchmark",
        "submission_org",
        "submission_division",
        "submission_platform",
        "harness_ruleset",
        "seed",
        "lowest_numerical_precision_in_linear",
        "config_filename",
        "global_batch_size",
        "gradient_accumulation_steps",
        "opt_base_learning_rate",
        "opt_learning_rate_training_steps",
        "opt_gradient_clip_norm",
        "opt_adamw_weight_decay",
        "lora_rank",
        "lora_alpha",
        "train_samples",
        "eval_samples",
        "init_stop",
        "run_start",
    ]
    pos = [keys.index(k) for k in order]
    assert pos == sorted(pos)
    hp = {e["key"]: e["value"] for e in ev}
    # the default ruleset (6.1.0): no submission_status since 4.1.0, the disclosure keys of what ran
    assert hp["harness_ruleset"] == "6.1.0" and "submission_status" not in hp
    assert [hp[f"lowest_numerical_precision_in_{k}"] for k in ("linear", "attn", "comm")] == ["bfloat16"] * 3
    assert (hp["tensor_parallelism"], hp["context_parallelism"], hp["micro_batch_size"]) == (1, 1, 8)
    assert hp["config_filename"] == "tiny.yaml"
    assert hp["lora_rank"] == 16 and hp["lora_alpha"] == 32 and isinstance(hp["lora_alpha"], int)
    assert hp["opt_gradient_clip_norm"] == 0.3 and hp["opt_adamw_weight_decay"] == 1e-4
    assert hp["train_samples"] == 2048 and hp["eval_samples"] == 64
    evals = [e for e in ev if e["key"] == "eval_accuracy"]
    # Eval every 96 samples (12 steps of GBS 8); floor(0.125 * 8 + 2) = 3 slots skipped.
    assert evals[0]["metadata"]["samples_count"] == 4 * 96
    assert all(e["metadata"]["samples_count"] % 96 == 0 for e in evals)
    target = get("llama2_70b_lora").rules.quality[0].tiny
    assert evals[-1]["value"] <= target < evals[0]["value"]
    assert ev[-1]["key"] == "run_stop" and ev[-1]["metadata"]["status"] == "success"
    assert ev[-1]["metadata"]["samples_count"] == evals[-1]["metadata"]["samples_count"]

    rundir = Path(run.get("run_dir") or log.parent)
    timings = list(Path(res).rglob("timings.jsonl"))
    assert timings, rundir
    recs = [json.loads(x) for x in timings[0].read_text().splitlines()]
    assert {"step", "step_time_s", "data_wait_s", "samples_per_s"} <= set(recs[0])
    assert any("loss" in x for x in recs)

    # the whole result folder of 6.1.0 (10 copies of this log): package, system-description and
    # compliance checkers of that ruleset
    doc = check_as_tree(log, tmp_path / "tree")
    assert {r["ruleset"] for r in doc["logs"]} == {"6.1.0"} and len(doc["logs"]) == 10


# 2 ranks under torchrun, FSDP2 over gloo: DP 2 x MBS 4 x GA 1. Seed 5 reaches the target (1.6) at
# 2,016 samples (252 steps, 18 evals) at 2 ranks; 1 rank: 1,632.
# Under ruleset 5.0.0 (the default is 6.1.0): a submitter's earlier round, its own tiny rules.
FSDP2 = ("--nproc-per-node", "2", "--set", "micro_batch_size=4", "--ruleset", "5.0.0")
FSDP2_SEED = 5
# The killed run stops at step 96 (`max_steps`: the loop ends, the data order stays): its first
# checkpoint is at step 24 (tiny.yaml checkpoint_interval_steps), it is killed right after it, and
# the evals at steps 48, 60, 72, 84 and 96 (sample 384 on, every 96 samples) are the resumed ones.
RESUMED_STEPS = 96


def _fsdp2_run(tmp_path_factory, data) -> dict:
    """One uninterrupted 2-rank run, once per pytest run: the FSDP test's and the resume test's
    reference."""
    doc = uninterrupted_run(tmp_path_factory, "llama2-fsdp2", "llama2_70b_lora", data, FSDP2_SEED, *FSDP2)
    (run,) = doc["runs"]
    assert run["status"] == "success"
    return run


@pytest.fixture(scope="module")
def fsdp2_run(tmp_path_factory, data) -> dict:
    return _fsdp2_run(tmp_path_factory, data)


def test_two_ranks_fsdp_over_gloo_reach_target(fsdp2_run):
    """torchrun, 2 CPU ranks: FSDP2 shards the base (meta build, per-rank shard reads), DP 2 x MBS 4."""
    ev = events(Path(fsdp2_run["result_file"]))
    assert {e["key"]: e["value"] for e in ev}["gradient_accumulation_steps"] == 1
    assert official_check(Path(fsdp2_run["result_file"])).returncode == 0
    hp = {e["key"]: e["value"] for e in ev}
    assert (
        hp["harness_ruleset"] == "5.0.0" and hp["lowest_numerical_precision_in_linear"] == "fp32"
    )  # tiny.yaml


def test_two_ranks_fsdp_kill9_after_first_checkpoint_resume_gives_the_same_curve(
    tmp_path, tmp_path_factory, data
):
    """The same 2-rank run killed (kill -9, the whole tree) right after its first checkpoint, then
    `mlperf run --resume`: every rank wrote its DCP shard, and every eval after the resume point
    equals the uninterrupted run's. Tolerance rel 1e-5: both do the same fp32 arithmetic in the
    same order (one thread per rank, the same gloo reductions) and agree bit for bit (measured:
    34 of 34 evals, to the earlier target 1.35); zeroing the AdamW moments at the load instead
    moves the first eval by 1.9 % and the worst by 5.6 %. The killed run stops at RESUMED_STEPS
    (768 samples, eval loss ~2.3, far above the target), so the resume is compared over 5 evals,
    not the 18 to the target: a lost state shows at the first one."""
    results = tmp_path / "results"
    stop = ("--set", f"max_steps={RESUMED_STEPS}")
    argv = mlperf_argv(*one_run_args("llama2_70b_lora", results, data, FSDP2_SEED, *FSDP2, *stop))
    run, killed = kill_after_first_checkpoint(argv, results / "runs" / "llama2_70b_lora" / "cpu-local")
    assert len(killed) >= 3  # torchrun + 2 ranks (each in its own session)
    ck = sorted((run / "checkpoints").glob("step_*"))[0]
    files = json.loads((ck / "manifest.json").read_text())["files"]
    for r in (0, 1):  # each rank its own shard file, hashed into the manifest
        assert files[f"sharded/__{r}_0.distcp"]["bytes"] > 0 and f"rank_{r:05d}.pt" in files
    assert "sharded/.metadata" in files
    # What it holds: the LoRA weights and their AdamW state, nothing of the frozen base. The ranks'
    # row shards of each lora_A differ (the init draws the whole tensor: model.init_lora_sharded).
    import torch
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    dcp_to_torch_save(ck / "sharded", tmp_path / "whole.pt")
    saved = torch.load(tmp_path / "whole.pt", weights_only=True)
    assert saved["model"] and all(".lora_" in k for k in saved["model"])
    assert set(saved["optimizer"]) == set(saved["model"])
    assert all({"exp_avg", "exp_avg_sq", "step"} == set(v) for v in saved["optimizer"].values())
    for k, a in saved["model"].items():
        if ".lora_A." in k:
            assert not torch.equal(*a.chunk(2)), k  # rank 0 rows, rank 1 rows

    record = resume_run("llama2_70b_lora", run, ok=(3,))  # stopped at max_steps: not reached
    assert record["status"] == "aborted", record
    ev = events(run / "mlperf.log")
    keys = [e["key"] for e in ev]
    assert keys.count("run_start") == keys.count("run_stop") == keys.count("harness_resumed") == 1
    assert ev[keys.index("harness_resumed")]["value"] == 24  # the step of the first checkpoint
    assert ev[-1]["metadata"]["samples_count"] == RESUMED_STEPS * 8  # GBS 8
    # The reference only now: the other worker can be making it meanwhile (once_per_run).
    fsdp2_run = _fsdp2_run(tmp_path_factory, data)
    assert assert_resumed_curve_matches(run, fsdp2_run["log"], rel=1e-5, stopped_early=True) == 5
