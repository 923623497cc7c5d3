"""What several test modules share of tiny flux1: its prepared data and one uninterrupted run, each
made once per pytest run (test_flux1_tiny.py, test_every_benchmark.py)."""

from __future__ import annotations

from pathlib import Path

from helpers import prepared_once, uninterrupted_run

SEED = 7
"""The shared uninterrupted run's seed (also the GA test's: test_every_benchmark CASES)."""


def prepared(tmp_path_factory) -> Path:
    return prepared_once(tmp_path_factory, "flux1-data", "flux1")


def plain_run(tmp_path_factory) -> dict:
    """One uninterrupted run (seed SEED, 6.1.0) to the target, once per pytest run."""
    doc = uninterrupted_run(tmp_path_factory, "flux1-plain", "flux1", prepared(tmp_path_factory), SEED)
    (run,) = doc["runs"]
    assert run["status"] == "success", run
    return run
