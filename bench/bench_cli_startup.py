"""How long `mlperf --help` takes, against a bare `python -c pass` in the same run.

    python bench/bench_cli_startup.py [--repeat 15]

Goal: `mlperf --help` <= 0.3 s. Prints the best and median of N cold subprocess starts and the
ratio to the interpreter's own start-up, plus the same for `mlperf run gpt3 --dry-run`
(which must not import torch either).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def timed(argv: list[str], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    n = ap.parse_args().repeat
    py = sys.executable
    base = timed([py, "-c", "pass"], n)
    cases = {
        "mlperf --help": [py, "-m", "harness.cli", "--help"],
        "mlperf run gpt3 --dry-run": [py, "-m", "harness.cli", "run", "gpt3", "--dry-run", "--seed", "1"],
    }
    print(f"{'command':32s} {'best s':>8s} {'median s':>9s} {'x python -c pass':>17s}")
    print(f"{'python -c pass (baseline)':32s} {min(base):8.3f} {statistics.median(base):9.3f} {1.0:17.2f}")
    for name, argv in cases.items():
        t = timed(argv, n)
        print(
            f"{name:32s} {min(t):8.3f} {statistics.median(t):9.3f} {statistics.median(t) / statistics.median(base):17.2f}"
        )
    helps = timed(cases["mlperf --help"], 5)
    verdict = "ok" if statistics.median(helps) <= 0.3 else "OVER GOAL"
    print(f"goal: mlperf --help <= 0.300 s -> {statistics.median(helps):.3f} s ({verdict})")


if __name__ == "__main__":
    main()
