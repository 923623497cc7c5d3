"""`python -m reference_impls.llama2_70b_lora --plan PLAN.json` in every rank.

Exit code: 0 target reached, 3 not reached (run_stop status=aborted), 130 stopped by a signal,
2 bad input (one line `error: ...`; run_stop aborted if the run had started), 1 crash
(harness/train/entry.py: run_training).
"""

from __future__ import annotations

import os
import sys

from harness.train.entry import run_training

# Set before train.py imports the HF libraries (they read it then): the model is built from a local
# config, never fetched.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv=None) -> int:
    return run_training(
        "reference_impls.llama2_70b_lora.train:run", argv, prog="python -m reference_impls.llama2_70b_lora"
    )


if __name__ == "__main__":
    sys.exit(main())
