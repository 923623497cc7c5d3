"""`python -m reference_impls.gpt_oss_20b --plan PLAN.json`, in every rank (see NOTES.md, the contract).

The code is the Megatron-GPT family's (reference_impls/megatron_gpt/, model provider gpt_oss.py).
Exit codes: 0 target reached, 3 not reached (run_stop status=aborted), 130 stopped by a signal,
2 configuration error, 1 crash; every run that started ends its log with run_stop
(harness/train/entry.py: run_in_rank).
"""

from __future__ import annotations

from benchmarks.gpt_oss_20b import BENCHMARK
from harness.train.entry import run

if __name__ == "__main__":  # guard required: megatron's checkpoint workers re-import __main__
    run(BENCHMARK)
