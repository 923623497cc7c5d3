"""`mlperf diagnose` on published logs: what the MLLOG lines say (intervals, tracked_stats,
samples per evaluation) and the throughput per accelerator against an ingested database."""

from __future__ import annotations

import json
import shutil

import pytest
from fixtures import fixture_path
from test_results_score import REPO

from harness.review.diagnose import diagnose
from harness.review.results.ingest import ingest, load

LENOVO = "v5.0/Lenovo/results/SR780aV3-8xB200_SXM_180GB/llama2_70b_lora"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("diag")
    rounds = fixture_path("rounds")
    ingest(str(rounds / "v5.0"), "v5.0", str(base / "db"), check=False)
    # the same run, four times slower after run_start, in its own submission tree (same system)
    slow = base / "tree" / "Slow" / "results" / "SR780aV3-8xB200_SXM_180GB" / "llama2_70b_lora"
    slow.mkdir(parents=True)
    shutil.copytree(rounds / "v5.0" / "Lenovo" / "systems", base / "tree" / "Slow" / "systems")
    out, t0 = [], None
    for line in (rounds / LENOVO / "result_0.txt").read_text().splitlines():
        if ":::MLLOG " in line:
            head, rec = line.split(":::MLLOG ", 1)
            rec = json.loads(rec)
            t0 = rec["time_ms"] if rec["key"] == "run_start" else t0
            if t0 is not None:
                rec["time_ms"] = t0 + 4 * (rec["time_ms"] - t0)
            line = f"{head}:::MLLOG {json.dumps(rec)}"
        out.append(line)
    (slow / "result_0.txt").write_text("\n".join(out) + "\n")
    return {
        "rounds": rounds,
        "db": load(str(base / "db")),
        "db_path": base / "db",
        "slow": slow / "result_0.txt",
    }


def test_a_published_log_is_read_from_its_mllog_lines(world):
    log = next(world["rounds"].glob("v5.1/AMD/results/*/llama31_8b")) / "result_0.txt"
    rep = diagnose(log)
    p = rep.profile
    assert rep.benchmark == "llama31_8b" and rep.status == "success" and rep.findings == []
    assert p["blocks"] == p["evals"] == 14 and 0 < p["eval_share"] < 0.25 and p["median_eval_s"] > 0
    assert p["progress_unit"] == "samples_count" and p["median_samples_count_between_evals"] > 0
    assert p["tracked_throughput_median"] == pytest.approx(30.15, rel=0.05)  # the log's own figure
    assert p["accelerators"] == 8 and p["accelerator"] == "AMD Instinct MI355X"  # the tree's system JSON
    assert p["progress_per_s_per_acc"] == pytest.approx(p["progress_per_s"] / 8, rel=1e-4)


def test_a_quarter_of_the_best_published_throughput_is_a_finding(world):
    fast = diagnose(world["rounds"] / LENOVO / "result_0.txt", world["db"])
    assert not [f for f in fast.findings if f.id == "slow_vs_published"]
    rep = diagnose(world["slow"], world["db"])
    (f,) = [f for f in rep.findings if f.id == "slow_vs_published"]
    assert f.evidence["ratio"] == pytest.approx(0.25, rel=0.1)
    assert "Lenovo/SR780aV3-8xB200_SXM_180GB" in f.evidence["best_published"] and "B200" in f.symptom
    assert f.evidence["unit"].startswith("samples_count per second per accelerator")


def test_cli_on_a_loose_log_with_the_accelerators_given(world, tmp_path):
    import subprocess
    import sys

    loose = tmp_path / "run.log"
    shutil.copy(world["slow"], loose)
    args = [sys.executable, "-m", "harness.cli", "diagnose", str(loose), "--db", str(world["db_path"])]
    p = subprocess.run([*args, "--json"], capture_output=True, text=True, cwd=REPO)
    doc = json.loads(p.stdout)
    assert (
        p.returncode == 0 and not doc["findings"] and "accelerator count or model unknown" in doc["notes"][-1]
    )
    p = subprocess.run(
        [*args, "--accelerators", "8", "--accelerator", "NVIDIA B200"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert p.returncode == 0 and "throughput per accelerator at 2" in p.stdout and "evals=5" in p.stdout
