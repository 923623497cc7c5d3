"""Scoring: olympic mean, the five published v4.0 scores to 1e-6, odd logs and trees."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures import fixture_path

from harness.review.results.parse import read_run, time_to_train_min
from harness.review.results.score import olympic_mean, score_result_dir, score_tree

REPO = Path(__file__).resolve().parents[2]
V40, LOGS = fixture_path("mlperf_v4.0"), fixture_path("logs")


def line(t, key, value=None, **md):
    return ":::MLLOG " + json.dumps(
        {
            "namespace": "",
            "time_ms": t,
            "event_type": "POINT_IN_TIME",
            "key": key,
            "value": value,
            "metadata": {"file": "x.py", "lineno": 1, **md},
        }
    )


def run_log(start=1_000_000, minutes=10.0, status="success", prefix="", bench="gpt3"):
    stop = start + int(minutes * 60_000)
    lines = [
        line(start - 5000, "submission_benchmark", bench),
        line(start - 4000, "global_batch_size", 8),
        line(start, "run_start"),
        line(stop - 10, "eval_accuracy", 2.6, epoch_num=1),
        line(stop, "run_stop", status=status),
    ]
    return "\n".join(prefix + x for x in lines) + "\n"


# --- olympic mean -----------------------------------------------------------------------------


def test_olympic_mean_drops_fastest_and_slowest():
    assert olympic_mean([3.0, 1.0, 2.0]) == 2.0
    assert olympic_mean([5, 1, 2, 3, 4]) == 3.0


def test_olympic_mean_one_non_converged_run_is_the_dropped_slowest():
    assert olympic_mean([1.0, 2.0, None]) == 2.0
    assert olympic_mean([1.0, 2.0, 3.0, math.inf]) == 2.5


def test_olympic_mean_rejects_two_non_converged_or_too_few():
    with pytest.raises(ValueError, match="do not count"):
        olympic_mean([1.0, None, math.inf])
    with pytest.raises(ValueError, match="too few"):
        olympic_mean([1.0, 2.0])


# --- published scores -------------------------------------------------------------------------


def test_five_published_scores_reproduced():
    expected = {
        (r["system_folder"], r["benchmark"]): r for r in csv.DictReader(open(V40 / "expected_scores.csv"))
    }
    rows = score_tree(V40)
    assert len(rows) == 5
    for r in rows:
        e = expected[(r["system"], r["benchmark"])]
        assert r["submitter"] == e["submitter"] and r["division"] == e["division"]
        assert (
            r["accelerators"] == int(e["accelerators_count"])
            and r["accelerator"] == e["accelerator_model_name"]
        )
        assert r["runs"] == int(e["n_result_files"])
        assert abs(r["score_min"] - float(e["score_min"])) <= 1e-6
        assert abs(r["olympic_mean_min"] - float(e["raw_olympic_mean_min"])) <= 1e-6
        assert r["scaling_factor"] == pytest.approx(float(e["rcp_scaling_factor"]), rel=1e-12)
        assert r["problems"] == []


def test_stable_diffusion_time_ignores_evals_after_run_stop():
    f = V40 / "NVIDIA/results/h200_ngc24.04_nemo/stable_diffusion/result_0.txt"
    run = read_run(f)
    assert run.minutes == pytest.approx((run.run_stop_ms - run.run_start_ms) / 60000)
    assert any(
        '"eval_accuracy"' in x and json.loads(x.split(":::MLLOG ")[1])["time_ms"] > run.run_stop_ms
        for x in f.read_text(encoding="latin-1").splitlines()
        if ":::MLLOG " in x
    )


# --- odd logs ---------------------------------------------------------------------------------


def test_prefixes_and_raw_job_output(tmp_path):
    body = (
        "srun: job 42 started\nsome noise\n" + run_log(minutes=12.5, prefix="0: [rank0] ") + "Traceback? no\n"
    )
    p = tmp_path / "result_0.txt"
    p.write_text(body)
    assert time_to_train_min(p) == pytest.approx(12.5)


def test_odd_files_never_raise(tmp_path):
    cases = {
        "empty.txt": b"",
        "junk.txt": os.urandom(4096),
        "latin1.txt": run_log().encode() + b"\xff\xfe\xfa not utf-8\n",
        "huge.txt": b":::MLLOG {" + b"x" * 10_000_000 + b"\n",
        "nometa.txt": b':::MLLOG {"time_ms": 1, "key": "run_start", "value": null}\n',
        "list.txt": b":::MLLOG [1, 2]\n",
        "truncated.txt": run_log().encode()[:-60],
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    os.symlink("loop_b.txt", tmp_path / "loop_a.txt")
    os.symlink("loop_a.txt", tmp_path / "loop_b.txt")
    for p in sorted(tmp_path.iterdir()):
        run = read_run(p)
        assert run.minutes is None or p.name == "latin1.txt", p.name
        if p.name != "latin1.txt":
            assert not run.readable and (run.problems or run.parse_errors), p.name
    assert read_run(tmp_path / "latin1.txt").minutes == pytest.approx(10.0)


def _tree(tmp, runs, system_json=True, bench="gpt3"):
    d = tmp / "Org" / "results" / "sys1" / bench
    d.mkdir(parents=True)
    for i, text in enumerate(runs):
        (d / f"result_{i}.txt").write_text(text)
    if system_json:
        (tmp / "Org" / "systems").mkdir()
        (tmp / "Org" / "systems" / "sys1.json").write_text(
            json.dumps(
                {
                    "division": "open",
                    "status": "Available on-premise",
                    "number_of_nodes": "1",
                    "accelerators_per_node": "8",
                    "accelerator_model_name": "Acc",
                    "system_name": "S",
                }
            )
        )
    return d


def test_without_the_check_an_aborted_run_is_the_dropped_slowest(tmp_path):
    d = _tree(tmp_path, [run_log(minutes=10), run_log(minutes=20), run_log(minutes=5, status="aborted")])
    row = score_result_dir(d, check=False)
    assert row["run_minutes"] == [10.0, 20.0, None] and not row["checked"]
    assert row["score_min"] == 20.0  # drop fastest (10), the aborted run is the dropped slowest
    assert any("aborted" in p and "5.000 min" in p for p in row["problems"])
    # checked (the default), these minimal logs fail the compliance check: no run counts
    row = score_result_dir(d)
    assert row["checked"] and row["score_min"] is None and row["run_minutes"] == [None] * 3
    assert all(
        "fails the 4.1.0 compliance check" in p for p in row["problems"][:3]
    )  # gpt3: the newest listing it


def test_two_bad_runs_no_score_and_scaling_json_applied(tmp_path):
    d = _tree(tmp_path, [run_log(minutes=10), "", run_log(minutes=5, status="aborted")])
    row = score_result_dir(d, check=False)
    assert row["score_min"] is None and any("no valid score" in p for p in row["problems"])
    d2 = _tree(tmp_path / "b", [run_log(minutes=m) for m in (1, 2, 3)])
    (d2 / "scaling.json").write_text('{"scaling_factor": 1.5}')
    assert score_result_dir(d2, check=False)["score_min"] == 3.0
    (d2 / "scaling.json").write_text("{broken")
    row = score_result_dir(d2, check=False)
    assert row["score_min"] == 2.0 and any("scaling.json is unreadable" in p for p in row["problems"])


def test_missing_systems_json_is_reported(tmp_path):
    d = _tree(tmp_path, [run_log(minutes=m) for m in (1, 2, 3)], system_json=False)
    row = score_result_dir(d, check=False)
    assert row["score_min"] == 2.0 and any("missing systems/sys1.json" in p for p in row["problems"])


def test_cli_score_bad_inputs_no_traceback(tmp_path):
    d = _tree(tmp_path, ["", "\x00\x01binary", run_log()], system_json=False)
    os.symlink("nowhere/result_9.txt", d / "result_9.txt")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run(
        [sys.executable, "-m", "harness.cli", "results", "score", str(tmp_path), "--json", "--no-check"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert p.returncode == 0 and "Traceback" not in p.stderr
    doc = json.loads(p.stdout)
    assert doc["schema_version"] == 1 and doc["results"][0]["score_min"] is None
    assert "missing systems/sys1.json" in p.stderr
    p = subprocess.run(
        [sys.executable, "-m", "harness.cli", "results", "score", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert p.returncode == 2 and p.stderr.startswith("error:")


def test_differential_against_official_summarizer(tmp_path):
    """Prefixed lines, job noise, unsorted run times: same score as mlperf-logging's summarizer."""
    src = (LOGS / "closed_gnn.txt").read_text().splitlines()
    d = tmp_path / "Org" / "results" / "sys1" / "gnn"
    d.mkdir(parents=True)
    shift = [0, 61_234, 7_777, 123_456, 5, 99_999, 42, 3_141, 27_182, 11_111]
    for i, extra in enumerate(shift):
        out = ["slurm: step started", "garbage without token"]
        for x in src:
            if '"key": "run_stop"' in x:
                rec = json.loads(x.split(":::MLLOG ", 1)[1])
                rec["time_ms"] += extra
                x = ":::MLLOG " + json.dumps(rec)
            out.append(f"{i}: [rank0]:{x}" if i % 2 else x)
        (d / f"result_{i}.txt").write_text("\n".join(out) + "\n")
    (tmp_path / "Org" / "systems").mkdir()
    desc = json.loads((V40 / "NVIDIA" / "systems" / "h200_ngc24.04_dgl.json").read_text())
    (tmp_path / "Org" / "systems" / "sys1.json").write_text(json.dumps({**desc, "division": "open"}))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlperf_logging.result_summarizer",
            str(tmp_path / "Org"),
            "training",
            "4.0.0",
            "--csv",
            str(tmp_path / "s.csv"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    official = float(next(csv.DictReader(open(tmp_path / "s.csv")))["gnn"])
    assert score_result_dir(d, ruleset="4.0.0")["score_min"] == pytest.approx(official, abs=1e-9)


def test_failing_logs_are_dropped_like_the_summarizer_unless_no_check(tmp_path):
    d = tmp_path / "Org" / "results" / "s" / "gnn"
    d.mkdir(parents=True)
    for i in range(9):
        (d / f"result_{i}.txt").write_bytes((LOGS / "closed_gnn.txt").read_bytes())
    (d / "result_9.txt").write_bytes((LOGS / "broken_gnn_wrong_optimizer.txt").read_bytes())
    assert score_result_dir(d, check=False)["run_minutes"][9] is not None
    row = score_result_dir(d)
    assert row["run_minutes"][9] is None and row["score_min"] is not None and row["ruleset"] == "4.1.0"
    assert any("result_9.txt" in p and "compliance check" in p and "opt_name" in p for p in row["problems"])
