"""`python -m reference_impls.llama2_70b_lora --plan PLAN.json` in every rank.

Exit code: 0 target reached, 3 not reached (run_stop status=aborted), 130 stopped by a signal,
2 bad input (one line `error: ...`; run_stop aborted if the run had started).
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is built from a local config, never fetched


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reference_impls.llama2_70b_lora")
    ap.add_argument("--plan", required=True)
    args = ap.parse_args(argv)

    from harness.errors import HarnessError
    from harness.train import runtime
    from reference_impls.llama2_70b_lora import train

    rt = runtime.start(args.plan)
    success, error = False, None
    try:
        success = train.run(rt)
    except HarnessError as e:
        error = e
    finally:
        code = rt.finish(success)  # run_stop status=aborted if training did not write one
    if error is not None:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    return code


if __name__ == "__main__":
    sys.exit(main())
