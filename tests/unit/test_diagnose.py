"""`mlperf diagnose`: each detector fires on its symptom and stays silent on a healthy run.

Synthetic run folders here (fast, one symptom each, with noise); real runs with injected
symptoms are in tests/integration/test_diagnose_runs.py."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

import benchmarks
from harness.core.mllog import MLLog
from harness.review.diagnose import diagnose
from harness.run import execute as runner


def _make_run(
    tmp_path,
    *,
    steps=80,
    step_s=0.05,
    wait_s=0.002,
    stall_every=0,
    stall_s=0.0,
    extra_stalls=(),
    evals=None,
    losses=None,
    output="",
    status="success",
    sets=(),
    seed=1,
    nproc=None,
):
    if nproc:  # GBS 16 over DP 2: MBS 8
        sets = (*sets, "micro_batch_size=8")
    plan = runner.make_plans(
        benchmarks.get("gpt3"),
        "cpu-local",
        "tiny",
        runs=1,
        seed=7,
        results_dir=tmp_path,
        sets=sets,
        nproc_per_node=nproc,
    )[0]
    rd = tmp_path / "run"
    rng = random.Random(seed)
    rows = []
    for s in range(1, steps + 1):
        t = step_s * rng.uniform(0.85, 1.25)  # a busy machine's jitter
        if s % 17 == 0:
            t *= 2.2  # and the odd slow step
        w = wait_s * rng.uniform(0.5, 1.5)
        if (stall_every and s % stall_every == 0) or s in extra_stalls:
            t += stall_s
        loss = losses[s - 1] if losses else 5.0 / (1 + 0.05 * s)
        rows.append(
            {
                "step": s,
                "step_time_s": t + w,
                "data_wait_s": w,
                "samples_per_s": 16 / (t + w),
                "loss": loss if s % 10 == 0 else None,
                "max_rss_mb": 900.0,
            }
        )
    from pathlib import Path

    rd = Path(plan.run_dir)
    (rd / "timings.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    log = MLLog(plan.log_path)
    log.header(
        plan, {"global_batch_size": 16, "opt_base_learning_rate": 0.003, "opt_learning_rate_warmup_steps": 10}
    )
    log.init_stop()
    log.run_start()
    evals = evals if evals is not None else [5.0 - 0.5 * i for i in range(8)] + [1.1]
    for i, v in enumerate(evals):
        log.event("eval_accuracy", v, {"epoch_num": (i + 1) * 24 * 16 * 64})
    log.run_stop(
        status == "success", {} if status == "success" else {"error": "training process exited with code 1"}
    )
    log.close()
    if output:
        (rd / "stdout.log").write_text(output)
    return rd


def _ids(rd):
    return {f.id for f in diagnose(rd).findings}


def test_healthy_run_is_quiet(tmp_path):
    for seed in range(5):  # several noise draws: no false alarm on jitter and the odd slow step
        sub = tmp_path / str(seed)
        assert _ids(_make_run(sub, seed=seed)) == set(), seed


def test_periodic_stalls_mean_network_congestion(tmp_path):
    rd = _make_run(tmp_path, stall_every=8, stall_s=0.4, nproc=2)  # two ranks: collectives ran
    (f,) = diagnose(rd).findings
    assert f.id == "unstable_speed" and "NCCL" in " ".join(f.remedy)
    assert f.evidence["stall_every_steps"] == 8 and f.evidence["stalls"] >= 9
    assert f.evidence["time_lost_share"] > 0.3


def test_one_process_stalls_are_not_the_network_and_a_busy_host_is_said(tmp_path):
    """Issue 47: a one-process CPU run slowed by other work was blamed on network congestion.
    One process runs no collective: the cause is the host; its load average (host_load.json,
    written by harness/train/timings.py) is said as evidence when it exceeds the cores."""
    rd = _make_run(tmp_path, stall_every=8, stall_s=0.4)  # cpu-local tiny: world size 1
    (rd / "host_load.json").write_text(
        json.dumps({"cores": 2, "start": {"load_avg": [5.3, 4.0, 2.0]}, "end": {"load_avg": [4.1, 4.2, 3.0]}})
    )
    rep = diagnose(rd)
    (f,) = rep.findings
    assert f.id == "unstable_speed" and f.evidence["processes"] == 1
    text = " ".join([f.cause, f.summary, *f.remedy])
    assert "network" not in f.cause.replace("not the network", "") and "NCCL" not in text
    assert "other work on the host" in f.cause
    busy = "the host was busy: load average 5.3 on 2 cores"
    assert busy in f.summary and any(n.startswith(busy) for n in rep.notes)
    assert rep.to_dict()["host"] == {"cores": 2, "load_1m_start": 5.3, "load_1m_end": 4.1}
    # an idle host (load at most the cores) is not called busy
    (rd / "host_load.json").write_text(json.dumps({"cores": 2, "start": {"load_avg": [1.9, 1, 1]}}))
    rep = diagnose(rd)
    assert not any("busy" in n for n in rep.notes) and "busy" not in rep.findings[0].summary


def test_the_period_survives_stalls_of_another_cause(tmp_path):
    """A busy host adds stalls off the period (the diagnose integration test's toy, 40 steps beside
    two CPU hogs, reported no period): each breaks two gaps, not the lattice of every 8th step.
    Fails with the period taken from regular gaps alone."""
    rd = _make_run(tmp_path, stall_every=8, stall_s=0.4, extra_stalls=(13, 29, 51), nproc=2)
    (f,) = diagnose(rd).findings
    assert f.evidence["stall_every_steps"] == 8 and f.evidence["stalls"] >= 12


def test_high_data_wait_means_data_loading(tmp_path):
    rd = _make_run(tmp_path, wait_s=0.06)
    (f,) = diagnose(rd).findings
    assert f.id == "data_loading" and f.evidence["data_wait_share"] > 0.4
    assert any("worker" in r for r in f.remedy) and any("prefetch" in r for r in f.remedy)


@pytest.mark.parametrize(
    "evals,kind",
    [
        ([5.0, 5.6, 6.3, 7.5], "diverging"),
        ([5.0, 4.0, float("nan")], "diverged"),
        ([5.0, 3.0, 2.50, 2.49, 2.49, 2.48], "flat"),
    ],
)
def test_non_converging_loss_means_learning_rate(tmp_path, evals, kind):
    rd = _make_run(tmp_path, evals=evals, status="aborted")
    (f,) = diagnose(rd).findings
    assert f.id == "learning_rate" and f.extra["kind"] == kind
    assert "mlperf lr-find gpt3 --system cpu-local" in f.remedy[0]
    assert f.evidence["opt_base_learning_rate"] == 0.003


def test_out_of_memory_suggests_concrete_settings(tmp_path):
    out = "Traceback...\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    rd = _make_run(tmp_path, steps=3, evals=[], output=out, status="aborted", sets=("micro_batch_size=8",))
    (f,) = diagnose(rd).findings
    assert f.id == "out_of_memory"
    text = "\n".join(f.remedy)
    # GBS 16 = DP 1 x MBS 8 x GA 2 -> MBS 4 x GA 4, same GBS; TP 2 needs 2 ranks on cpu-local (1).
    assert "--set micro_batch_size=4" in text and "MBS 4 x GA 4" in text and "GBS 16" in text
    assert "activation_recompute=selective" in text


def test_cli_json_and_text(tmp_path):
    rd = _make_run(tmp_path, stall_every=8, stall_s=0.4, nproc=2)
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "diagnose", str(rd), "--json"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["healthy"] is False and [f["id"] for f in doc["findings"]] == ["unstable_speed"]
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "diagnose", str(rd / "mlperf.log")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and "network congestion" in r.stdout and "nccl-tests" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "diagnose", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and r.stderr.startswith("error:")


def test_edited_timings_rows_are_skipped_not_crashed_on(tmp_path):
    """A string or list step, a 400-digit time, NaN: TypeError / unhashable / OverflowError in
    `mlperf diagnose` before read_timings checked the rows' types (issue 22)."""
    import json as _json

    from harness.core.runfolder import read_timings

    good = [
        {"step": i, "step_time_s": 0.1, "data_wait_s": 0.01, "samples": 16, "loss": None} for i in (1, 2, 3)
    ]
    bad = [
        {"step": "4", "step_time_s": 0.1},
        {"step": [5], "step_time_s": 0.1},
        {"step": 6, "step_time_s": int("9" * 400)},
        {"step": 7, "step_time_s": float("nan")},
        {"step": True, "step_time_s": 0.1},
        {"step": 8, "step_time_s": 0.1, "samples": "16"},
    ]
    diverged = [
        {"step": 9, "step_time_s": 0.1, "loss": 1.4e21},
        {"step": 10, "step_time_s": 0.1, "loss": float("nan")},
    ]
    p = tmp_path / "timings.jsonl"
    p.write_text("".join(_json.dumps(r) + "\n" for r in good[:2] + bad + good[2:] + diverged))
    rows = read_timings(p)
    assert rows[:3] == good and [r["step"] for r in rows[3:]] == [9, 10]  # a diverging run's loss stays


def test_every_run_records_the_load_beside_it(tmp_path):
    """harness/train/timings.py (rank 0 of every loop) writes host_load.json at the start and the
    end of the run; diagnose reads both back."""
    from types import SimpleNamespace

    from harness.review.diagnose import host
    from harness.train.timings import Timings

    plan = SimpleNamespace(run_dir=str(tmp_path), resume_from=None)
    t = Timings(SimpleNamespace(plan=plan, is_rank0=True))
    doc = json.loads((tmp_path / "host_load.json").read_text())
    assert doc["cores"] >= 1 and len(doc["start"]["load_avg"]) == 3 and "end" not in doc
    t.close()
    got = host.load(tmp_path)
    assert got is not None and set(got) == {"cores", "load_1m_start", "load_1m_end"}
