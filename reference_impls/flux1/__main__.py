"""`python -m reference_impls.flux1 --plan PLAN.json` in every rank (torchrun/srun set RANK etc.).

Exit codes: 0 target reached, 3 not reached (run_stop aborted), 130 stopped by a signal, 2 bad
input (one line `error: ...`, e.g. a missing split or a wrong shape), 1 crash. A crash still leaves
run_stop aborted (harness/train/entry.py: run_in_rank).
"""

from __future__ import annotations

from benchmarks.flux1 import BENCHMARK
from harness.train.entry import run

if __name__ == "__main__":
    run(BENCHMARK)
