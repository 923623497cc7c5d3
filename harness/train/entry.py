"""`python -m reference_impls.<name>[.prepare] --plan PLAN.json`: the shared process entry.

Turns a HarnessError (bad dataset, missing checkpoint, ...) into one `error:` line on stderr and
its exit code, so `mlperf run`/`prepare` can relay it without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from harness.errors import HarnessError


def main(fn: Callable[[str], int | None], description: str = "") -> None:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--plan", required=True, help="plan.json written by `mlperf run`/`mlperf prepare`")
    args = parser.parse_args()
    try:
        rc = fn(args.plan)
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        sys.exit(e.exit_code)
    sys.exit(rc or 0)
