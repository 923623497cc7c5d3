"""`mlperf lr-find gpt3 --system cpu-local`: a full sweep at tiny size, a PNG, a suggestion that
trains tiny gpt3 to its target, and nothing written into the submission tree."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from gpt3_helpers import REPO, env, prepared_data_dir

pytestmark = pytest.mark.slow  # trains or starts rank processes: not in the -m 'not slow' loop


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return prepared_data_dir(tmp_path_factory)


def _mlperf(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=REPO,
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_lr_find_suggestion_trains_to_target(tmp_path, data_dir):
    results = tmp_path / "results"
    r = _mlperf(
        "lr-find",
        "gpt3",
        "--system",
        "cpu-local",
        "--results-dir",
        str(results),
        "--data-dir",
        str(data_dir),
        "--json",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert 200 <= doc["steps_run"] <= 300 and len(doc["lrs"]) == len(doc["losses"]) == len(doc["smoothed"])
    assert doc["lrs"] == sorted(doc["lrs"]) and doc["lrs"][0] == pytest.approx(1e-5)
    lr = doc["suggested_lr"]
    assert 3e-4 < lr < 5e-3 and lr == pytest.approx(doc["lr_at_min"] / 2)
    with open(doc["png"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    # Only lr-find's own folder: no org folder, no result file, no system JSON.
    written = [p.relative_to(results).parts[0] for p in results.rglob("*") if p.is_file()]
    assert set(written) == {"lr-find"}
    assert not list(results.rglob("result_*.txt"))

    run = _mlperf(
        "run",
        "gpt3",
        "--system",
        "cpu-local",
        "--runs",
        "1",
        "--seed",
        "11",
        "--results-dir",
        str(results),
        "--data-dir",
        str(data_dir),
        "--set",
        f"opt_base_learning_rate={lr:.3g}",
        "--json",
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    res = json.loads(run.stdout)["runs"][0]
    assert res["status"] == "success"
    from harness.review.diagnose import diagnose

    report = diagnose(res["run_dir"])  # a healthy real gpt3 run: no false alarm
    assert report.findings == [] and report.steps > 24, [f.summary for f in report.findings]
