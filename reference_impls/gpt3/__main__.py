"""`python -m reference_impls.gpt3 --plan PLAN.json`, in every rank (see NOTES.md, the contract).

Exit codes: 0 target reached, 3 not reached (run_stop status=aborted), 130 stopped by a signal,
2 configuration error, 1 crash; every run that started ends its log with run_stop.
"""

from __future__ import annotations

import argparse
import sys
import traceback


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reference_impls.gpt3")
    ap.add_argument("--plan", required=True, help="plan.json written by the harness")
    args = ap.parse_args(argv)

    from harness.errors import HarnessError
    from harness.train import runtime
    from reference_impls.gpt3 import train

    rt = runtime.start(args.plan)
    success, code = False, None
    try:
        success = train.run(rt)
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        code = e.exit_code
    except BaseException:  # a crash still ends the log with run_stop status=aborted
        traceback.print_exc()
        code = 1
    finally:
        rc = rt.finish(success)
    return rc if code is None or rc == 130 else code


if __name__ == "__main__":
    sys.exit(main())
