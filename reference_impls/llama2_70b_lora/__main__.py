"""`python -m reference_impls.llama2_70b_lora --plan PLAN.json` in every rank.

Exit code: 0 target reached, 3 not reached (run_stop status=aborted), 130 stopped by a signal,
2 bad input (one line `error: ...`; run_stop aborted if the run had started), 1 crash
(harness/train/entry.py: run_in_rank).
"""

from __future__ import annotations

import os

# Models are built from local config, never fetched (set before transformers is imported).
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.llama2_70b_lora import BENCHMARK  # noqa: E402
from harness.train.entry import run  # noqa: E402

if __name__ == "__main__":  # guard required: megatron's checkpoint workers re-import __main__
    run(BENCHMARK)
