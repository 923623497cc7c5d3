"""`python -m reference_impls.deepseekv3_671b --plan PLAN.json`, in every rank (see NOTES.md, the contract).

The code is the Megatron-GPT family's (reference_impls/megatron_gpt/, model provider deepseek.py).
Exit codes: 0 target reached, 3 not reached (run_stop status=aborted), 130 stopped by a signal,
2 configuration error, 1 crash; every run that started ends its log with run_stop
(harness/train/entry.py: run_in_rank).
"""

from __future__ import annotations

from benchmarks.deepseekv3_671b import BENCHMARK
from harness.train.entry import run

if __name__ == "__main__":  # guard required: megatron's checkpoint workers re-import __main__
    run(BENCHMARK)
