"""What several test modules share of tiny llama31_8b: its prepared data and one uninterrupted run,
each made once per pytest run (test_llama31_tiny.py, test_every_benchmark.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers import REPO, env, mlperf_argv, once_per_run, uninterrupted_run

SEED = 7
"""The shared uninterrupted run's seed (also the GA test's: test_every_benchmark CASES)."""


def prepared(tmp_path_factory) -> Path:
    """`mlperf prepare llama31_8b` once per pytest run (the on-demand prepare inside `mlperf run` is
    gpt3's quick-start test's; the family's prepare is the same code)."""

    def make(folder: Path):
        r = subprocess.run(
            mlperf_argv("prepare", "llama31_8b", "--data-dir", str(folder)),
            cwd=REPO, env=env(), capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr[-3000:]

    return once_per_run(tmp_path_factory, "llama31-data", make)


def plain_run(tmp_path_factory) -> dict:
    """One uninterrupted run (seed SEED, 6.1.0), once per pytest run: the resume test's and the GA
    test's reference."""
    doc = uninterrupted_run(tmp_path_factory, "llama31-plain", "llama31_8b", prepared(tmp_path_factory), SEED)
    (run,) = doc["runs"]
    assert run["status"] == "success", run
    return run
