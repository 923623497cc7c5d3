"""What several test modules share of tiny gpt_oss_20b: its prepared data and one uninterrupted run,
each made once per pytest run (test_gpt_oss_tiny.py, test_every_benchmark.py)."""

from __future__ import annotations

from pathlib import Path

from helpers import prepared_once, uninterrupted_run

SEED = 7
"""The shared uninterrupted run's seed (also the GA test's: test_every_benchmark CASES)."""


def prepared(tmp_path_factory) -> Path:
    """`mlperf prepare gpt_oss_20b` once per pytest run (the on-demand prepare inside `mlperf run` is
    gpt3's quick-start test's; the family's prepare is the same code)."""
    return prepared_once(tmp_path_factory, "gpt-oss-data", "gpt_oss_20b")


def plain_run(tmp_path_factory) -> dict:
    """One uninterrupted run (seed SEED, 6.1.0), once per pytest run: the resume test's and the GA
    test's reference."""
    doc = uninterrupted_run(
        tmp_path_factory, "gpt-oss-plain", "gpt_oss_20b", prepared(tmp_path_factory), SEED
    )
    (run,) = doc["runs"]
    assert run["status"] == "success", run
    return run
