"""Where the test suite's wall time goes, per xdist worker.

    rm -f /tmp/tl.tsv && MLPERF_TEST_TIMELINE=/tmp/tl.tsv python -m pytest -q
    python bench/suite_timeline.py /tmp/tl.tsv [--min-s 4]

tests/conftest.py appends one line per test (worker, start, stop, CPU seconds, nodeid) when
MLPERF_TEST_TIMELINE is set; the CPU seconds are the worker's own and its waited-for children's
(training processes), so a test whose CPU is far below its wall time was waiting (sleeps, polls,
a lock, a scheduler) and one far above used both cores. This prints, per worker, its busy seconds, when it finished, and every
test longer than --min-s with its start offset: a worker that finishes long before the other shows
an unbalanced order (conftest LONGEST_FIRST); a test far longer than its own work is waiting on a
once_per_run lock the other worker holds.

Then the same seconds per benchmark (issue 43's budget: at most 60 s of wall per benchmark's tiny
runs beyond what it shares): a test counts for the benchmark its file or parameter names
(BENCHMARK_WORDS); the rest (the CLI, Slurm, power, build and review tests, most of which train tiny
gpt3 as their vehicle) is the harness's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

BENCHMARK_WORDS = {
    "gpt3": ("gpt3",),
    "llama2_70b_lora": ("llama2",),
    "stable_diffusion": ("stable_diffusion", "test_sd_", "[sd"),
    "gnn": ("gnn",),
    "llama31_8b": ("llama31",),
    "flux1": ("flux1",),
}
"""A test belongs to the benchmark whose word its node id contains (the first that matches)."""


def benchmark_of(nodeid: str) -> str:
    low = nodeid.lower()
    return next((b for b, words in BENCHMARK_WORDS.items() if any(w in low for w in words)), "harness")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("timeline", type=Path)
    ap.add_argument("--min-s", type=float, default=4.0, help="list tests at least this long")
    args = ap.parse_args()
    rows = []
    for line in args.timeline.read_text().splitlines():
        worker, start, stop, cpu, nodeid = line.split("\t", 4)
        rows.append((worker, float(start), float(stop), float(cpu), nodeid))
    t0 = min(r[1] for r in rows)
    end = max(r[2] for r in rows) - t0
    print(f"{len(rows)} tests, {end:.0f} s from the first start to the last stop")
    for worker in sorted({r[0] for r in rows}):
        mine = sorted((r for r in rows if r[0] == worker), key=lambda r: r[1])
        busy, cpu = sum(r[2] - r[1] for r in mine), sum(r[3] for r in mine)
        print(f"== {worker}: busy {busy:.0f} s, CPU {cpu:.0f} s, done at {mine[-1][2] - t0:.0f} s")
        print(f"{'start':>7s} {'wall':>6s} {'CPU':>6s}")
        for _, start, stop, cpu, nodeid in mine:
            if stop - start >= args.min_s:
                print(f"{start - t0:7.1f} {stop - start:6.1f} {cpu:6.1f}  {nodeid}")
    print(f"{'benchmark':<18s} {'tests':>5s} {'wall':>7s} {'CPU':>7s}  (tests of 10 s or more)")
    for bench in [*BENCHMARK_WORDS, "harness"]:
        mine = [r for r in rows if benchmark_of(r[4]) == bench]
        long = sum(r[2] - r[1] >= 10 for r in mine)
        wall, cpu = sum(r[2] - r[1] for r in mine), sum(r[3] for r in mine)
        print(f"{bench:<18s} {len(mine):5d} {wall:7.0f} {cpu:7.0f}  ({long})")
    total = sum(r[3] for r in rows)
    print(f"CPU {total:.0f} s in all: {total / end:.2f} cores busy on average")


if __name__ == "__main__":
    main()
