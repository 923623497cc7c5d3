"""`python -m reference_impls.gpt3 --plan PLAN.json`, in every rank (see NOTES.md, the contract).

Exit codes: 0 target reached, 3 not reached (run_stop status=aborted), 130 stopped by a signal,
2 configuration error, 1 crash; every run that started ends its log with run_stop
(harness/train/entry.py: run_in_rank).
"""

from __future__ import annotations

from benchmarks.gpt3 import BENCHMARK
from harness.train.entry import run

if __name__ == "__main__":  # guard required: megatron's checkpoint workers re-import __main__
    run(BENCHMARK)
