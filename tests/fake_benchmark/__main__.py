"""`python -m tests.fake_benchmark --plan PLAN.json`: the fake benchmark's process entry."""

from __future__ import annotations

from harness.train.entry import run
from tests.fake_benchmark import BENCHMARK

if __name__ == "__main__":
    run(BENCHMARK)
