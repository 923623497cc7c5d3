"""`python -m reference_impls.<name>[.prepare] --plan PLAN.json`: the shared process entry.

Turns a HarnessError (bad dataset, missing checkpoint, ...) into one `error:` line on stderr and
its exit code, so `mlperf run`/`prepare` can relay it without a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Callable

from harness.errors import INTERNAL, INTERRUPTED, HarnessError


def _plan_path(argv: list[str] | None, prog: str | None = None, description: str = "") -> str:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--plan", required=True, help="plan.json written by `mlperf run`/`mlperf prepare`")
    return parser.parse_args(argv).plan


def main(
    fn: Callable[[str], int | None],
    description: str = "",
    argv: list[str] | None = None,
    prog: str | None = None,
) -> int:
    """`fn(plan_path)`'s exit code (None counts as 0), or a HarnessError's as one `error:` line."""
    plan = _plan_path(argv, prog, description)
    try:
        return fn(plan) or 0
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return e.exit_code


def run_training(train: str, argv: list[str] | None = None, prog: str | None = None) -> int:
    """A benchmark's training process, in every rank: `train` ("package.module:function") gets the
    started Runtime and returns success, or (success, run_stop metadata).

    Exit code: 0 target reached, 3 not reached, 130 stopped by a signal (whatever the training
    raised on the way out: an interrupted run is what the user needs to hear about), 2 (or the
    error's own code) for a HarnessError, 1 for a crash. Every run that started ends its log with
    run_stop, status=aborted unless the target was reached.
    """
    plan = _plan_path(argv, prog)
    from harness.train import runtime  # imports torch: not before the arguments are known good

    rt = runtime.start(plan)
    success, metadata, error, code = False, None, None, None
    try:
        # Imported here, not at the top of __main__, so that an import failure still closes the log.
        module, _, name = train.partition(":")
        result = getattr(importlib.import_module(module), name)(rt)
        success, metadata = result if isinstance(result, tuple) else (result, None)
    except HarnessError as e:
        error, code = e, e.exit_code
    except BaseException:
        traceback.print_exc()
        code = INTERNAL
    finally:
        rc = rt.finish(success, metadata)
    if error is not None:  # after finish: the one line stays the last thing on stderr
        print(f"error: {error}", file=sys.stderr, flush=True)
    return rc if code is None or rc == INTERRUPTED else code
