"""`python -m reference_impls.stable_diffusion --plan PLAN.json` in every rank (torchrun/srun set RANK etc.).

Exit codes: 0 target reached, 3 not reached (run_stop aborted), 130 stopped by a signal, 2 bad
input (one line `error: ...`, e.g. missing latents or eval weights). A crash still leaves run_stop aborted.
"""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reference_impls.stable_diffusion")
    ap.add_argument("--plan", required=True, help="plan.json written by the harness")
    args = ap.parse_args(argv)

    from harness.errors import HarnessError
    from harness.train import runtime

    rt = runtime.start(args.plan)
    try:
        from reference_impls.stable_diffusion.train import train

        success, metadata = train(rt)
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        rt.finish(False)
        return e.exit_code
    except BaseException:
        rt.finish(False)
        raise
    return rt.finish(success, metadata)


if __name__ == "__main__":
    sys.exit(main())
