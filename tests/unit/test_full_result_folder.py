"""`mlperf run` into a result folder that already holds the runs a result needs (issue 47: an
eleventh run was written silently): refused in one line naming the folder, its count and the
flag, exit 2, before anything is written; `--allow-extra-runs` lets it through."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import benchmarks
from harness.core.errors import ConfigError
from harness.run import claim
from harness.run import execute as ex

REPO = Path(__file__).resolve().parents[2]


def _fill(results: Path, n: int) -> Path:
    r = ex.resolve(benchmarks.get("gpt3"), "cpu-local", "tiny", runs=1, seed=1, results_dir=results)
    sub = r.plans[0].submission
    folder = results / sub.org / "results" / sub.system / r.plans[0].submission_benchmark
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"result_{i}.txt").write_text("")
    return folder


def test_the_check_counts_what_the_folder_holds(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    for i in range(9):
        (folder / f"result_{i}.txt").write_text("")
    claim.refuse_full_folder(folder, 10, 1, allow=False)  # the tenth: fine
    with pytest.raises(ConfigError) as e:
        claim.refuse_full_folder(folder, 10, 2, allow=False)  # a tenth and an eleventh
    msg = str(e.value)
    assert str(folder) in msg and "holds 9 result file(s) of the 10" in msg and "would make 11" in msg
    assert "--allow-extra-runs" in msg and "--results-dir" in msg and "\n" not in msg
    claim.refuse_full_folder(folder, 10, 2, allow=True)


def test_an_eleventh_run_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    results = tmp_path / "results"
    need = benchmarks.get("gpt3").rules.runs_per_result
    folder = _fill(results, need)
    args = [sys.executable, "-m", "harness.cli", "run", "gpt3", "--system", "cpu-local", "--size", "tiny"]
    args += ["--runs", "1", "--results-dir", str(results)]
    p = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    (line,) = p.stderr.strip().splitlines()
    assert f"{folder} already holds {need} result file(s)" in line and "--allow-extra-runs" in line
    # nothing written: no run folder, no system JSON, no new result
    assert sorted(x.name for x in results.rglob("*") if x.is_file()) == sorted(
        f"result_{i}.txt" for i in range(need)
    )
    # `--allow-extra-runs` gets past the count: the executor goes on to write the plans (stopped there)
    from click.testing import CliRunner

    from harness.cli import cli

    class Past(Exception):
        pass

    def stop(plans):
        raise Past

    monkeypatch.setattr(ex, "write_plans", stop)
    invoke = CliRunner().invoke
    res = invoke(cli, [*args[3:], "--allow-extra-runs"])
    assert isinstance(res.exception, Past), res.output
    res = invoke(cli, args[3:])
    assert isinstance(res.exception, ConfigError) and "--allow-extra-runs" in str(res.exception)
