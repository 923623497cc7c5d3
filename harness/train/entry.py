"""`python -m reference_impls.<name> --plan PLAN.json`: the one process entry of every benchmark.

    reference_impls/<name>/__main__.py:   sys.exit(main(SPEC))

The plan's `task` picks the spec's callable: "train" (every rank of a run), "prepare" (the data
step `mlperf run`/`prepare` starts in a child process), "lr_find" (every rank of an LR sweep).
A HarnessError (bad dataset, missing checkpoint, ...) becomes one `error:` line on stderr and its
exit code, so the CLI can relay it without a traceback.

Exit codes of a training process: 0 target reached, 3 not reached, 130 stopped by a signal, 2 (or
the error's own code) for a HarnessError, 1 for a crash. Every run that started ends its log with
run_stop, status=aborted unless the target was reached.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from harness.core.errors import INTERNAL, INTERRUPTED, HarnessError
from harness.core.runplan import RunPlan
from harness.core.spec import BenchmarkSpec


def _plan_path(argv: list[str] | None, prog: str) -> str:
    parser = argparse.ArgumentParser(prog=prog, description="a benchmark process, started by `mlperf`")
    parser.add_argument("--plan", required=True, help="plan.json written by `mlperf run`/`prepare`/`lr-find`")
    return parser.parse_args(argv).plan


def main(spec: BenchmarkSpec, argv: list[str] | None = None) -> int:
    """Run the task of the plan named on the command line; return the process exit code."""
    plan_path = _plan_path(argv, f"python -m {spec.module}")
    plan = RunPlan.load(Path(plan_path))
    if plan.task == "prepare":
        try:
            spec.prepare(plan)
            return 0
        except HarnessError as e:
            print(f"error: {e}", file=sys.stderr, flush=True)
            return e.exit_code
    if plan.task == "lr_find" and spec.lr_find is None:
        print(f"error: {spec.name} has no LR range test", file=sys.stderr, flush=True)
        return 2
    return run_in_rank(spec, plan_path)


def run_in_rank(spec: BenchmarkSpec, plan_path: str) -> int:
    """Start the runtime (process group, threads, log), run the task, always finish the log."""
    from harness.train import runtime  # imports torch: not before the arguments are known good

    rt = runtime.start(plan_path)
    rt.cfg = spec.config.model_validate(rt.plan.config)
    train = rt.plan.task == "train"
    success, metadata, error, code = not train, None, None, None
    try:
        result = spec.run(rt) if train else spec.lr_find(rt)
        if train:
            success, metadata = result if isinstance(result, tuple) else (result, None)
    except HarnessError as e:
        success, error, code = False, e, e.exit_code
    except BaseException:
        traceback.print_exc()
        success, code = False, INTERNAL
    finally:
        rc = rt.finish(success, metadata)
    if error is not None:  # after finish: the one line stays the last thing on stderr
        print(f"error: {error}", file=sys.stderr, flush=True)
    return rc if code is None or rc == INTERRUPTED else code
