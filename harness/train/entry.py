"""`python -m reference_impls.<name> --plan PLAN.json`: the one process entry of every benchmark.

    reference_impls/<name>/__main__.py:   entry.run(BENCHMARK)     # main(BENCHMARK), then the exit

The plan's `task` picks the implementation's callable (harness/core/benchmark.py): "train" (every
rank of a run: `impl.train(rt) -> RunOutcome`), "prepare" (the data
step `mlperf run`/`prepare` starts in a child process), "lr_find" (every rank of an LR sweep),
"build" (`mlperf run --dry-run --build`: one process builds each distinct rank shard of one or more
plans on the meta device, writing run_dir/build.json per plan; a failure is one line, exit 2).
A HarnessError (bad dataset, missing checkpoint, ...) becomes one `error:` line on stderr and its
exit code, so the CLI can relay it without a traceback.

Exit codes of a training process: 0 target reached, 3 not reached, 130 stopped by a signal, 2 (or
the error's own code) for a HarnessError, 1 for a crash. Every run that started ends its log with
run_stop, status=aborted unless the target was reached.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import NoReturn

from harness.core.benchmark import Implementation, RankBenchmark, RunOutcome
from harness.core.errors import INTERNAL, INTERRUPTED, HarnessError
from harness.core.runplan import RunPlan

_joined_group = False
"""Set once this process has started the training runtime (and so a process group)."""


def run(bench: RankBenchmark, argv: list[str] | None = None) -> NoReturn:
    """What `python -m reference_impls.<name>` does: `main`, then end the process with its code.

    A process that joined a process group ends with `os._exit` once its log and output are
    flushed, skipping interpreter finalization. Why: gloo's worker threads drop their last work
    (a collective's tensors, Python-owned) shortly *after* the caller's wait returns; when that
    drop lands during Py_FinalizeEx, the thread must take the GIL, CPython 3.12 ends it with
    pthread_exit, the unwind crosses a noexcept destructor and the rank aborts: "terminate
    called without an active exception", SIGABRT after a finished run (core dump: runLoop ->
    ~AsyncWork -> decref_pyobject -> take_gil -> PyThread_exit_thread). The group outlives
    destroy_process_group whenever something still holds it (DDP's reducer does), so this hit
    about 1 two-rank gnn run in 5 on 2 busy cores, and CI. Nothing is lost by skipping
    finalization: the MLPerf log and timings are closed by then, and stdio and logging are
    flushed here."""
    code = main(bench, argv)
    if not _joined_group:
        sys.exit(code)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing left to keep
            pass
    os._exit(code)


def _plan_paths(argv: list[str] | None, prog: str) -> list[str]:
    parser = argparse.ArgumentParser(prog=prog, description="a benchmark process, started by `mlperf`")
    parser.add_argument(
        "--plan",
        required=True,
        action="append",
        help="plan.json written by `mlperf run`/`prepare`/`lr-find` (task build: one or more)",
    )
    return parser.parse_args(argv).plan


def _impl(bench: RankBenchmark) -> Implementation:
    if bench.impl is None:  # a module that names no implementation cannot have been started by mlperf
        raise HarnessError(f"{bench.name} has no implementation to run", 2)
    return bench.impl


def main(bench: RankBenchmark, argv: list[str] | None = None) -> int:
    """Run the task of the plan named on the command line; return the process exit code."""
    impl = _impl(bench)
    paths = _plan_paths(argv, f"python -m {impl.module}")
    plan_path = paths[0]
    plan = RunPlan.load(Path(plan_path))
    if plan.task == "build":
        return build(bench, paths)
    if len(paths) > 1:
        print(f"error: task {plan.task} takes one --plan", file=sys.stderr, flush=True)
        return 2
    if plan.task == "prepare":
        try:
            impl.prepare(plan)
            return 0
        except HarnessError as e:
            print(f"error: {e}", file=sys.stderr, flush=True)
            return e.exit_code
    if plan.task == "lr_find" and impl.lr_find is None:
        print(f"error: {bench.name} has no LR range test", file=sys.stderr, flush=True)
        return 2
    return run_in_rank(bench, plan_path)


def run_in_rank(bench: RankBenchmark, plan_path: str) -> int:
    """Start the runtime (process group, threads, log), run the task, always finish the log."""
    from harness.train import runtime  # imports torch: not before the arguments are known good

    global _joined_group
    impl = _impl(bench)
    _joined_group = True  # from here on the process may hold gloo threads: see run()
    rt = runtime.start(plan_path, bench.config)
    train = rt.plan.task == "train"
    outcome, error, code = RunOutcome(not train), None, None
    try:
        if train:
            outcome = impl.train(rt)
            if not isinstance(outcome, RunOutcome):  # a loop that returns anything else is a bug
                raise TypeError(f"{impl.train.target} returned {type(outcome).__name__}, not RunOutcome")
        else:
            assert impl.lr_find is not None  # main() refused the task otherwise
            impl.lr_find(rt)
    except HarnessError as e:
        outcome, error, code = RunOutcome(False), e, e.exit_code
    except BaseException:
        traceback.print_exc()
        outcome, code = RunOutcome(False), INTERNAL
    finally:
        rc = rt.finish(outcome.reached, outcome.metadata)
    if error is not None:  # after finish: the one line stays the last thing on stderr
        print(f"error: {error}", file=sys.stderr, flush=True)
    return rc if code is None or rc == INTERRUPTED else code


def _where(e: BaseException) -> str:
    """The innermost frame of an exception, as `path:line in function` (site-packages stripped)."""
    tb = traceback.extract_tb(e.__traceback__)
    if not tb:
        return "?"
    f = tb[-1]
    path = f.filename.split("site-packages/")[-1]
    root = str(Path(__file__).resolve().parents[2]) + "/"
    return f"{path.removeprefix(root)}:{f.lineno} in {f.name}"


def build(bench: RankBenchmark, plan_paths: list[str]) -> int:
    """Build each plan's shards (`impl.build`) and write run_dir/build.json; on the first failure
    one line `error: <bench> on <system>: <what failed> (<where>)` and exit 2."""
    impl = _impl(bench)
    done: dict[str, tuple[str, dict]] = {}
    for path in plan_paths:
        plan = RunPlan.load(Path(path))
        who = f"{plan.benchmark} on {plan.submission.system}"
        key = _shape_key(plan)
        if key in done:  # the same shards as a config built already (another system, other LRs)
            first, report = done[key]
            Path(plan.run_dir, "build.json").write_text(json.dumps(dict(report, same_as=first), indent=1))
            continue
        if impl.build is None:
            print(f"error: {who}: {bench.name} has no build", file=sys.stderr, flush=True)
            return 2
        try:
            cfg = bench.config.model_validate(plan.config)
            report = impl.build(cfg, plan.layout, plan.device)
        except HarnessError as e:
            print(f"error: {who}: {e}", file=sys.stderr, flush=True)
            return e.exit_code
        except Exception as e:  # noqa: BLE001 - a build that fails is the answer, in one line
            what = str(e).strip().splitlines()[0] if str(e).strip() else ""
            what = f"{type(e).__name__}: {what}" if what else type(e).__name__
            print(f"error: {who}: {what} ({_where(e)})", file=sys.stderr, flush=True)
            return 2
        Path(plan.run_dir, "build.json").write_text(json.dumps(report, indent=1, sort_keys=True))
        done[key] = (plan.submission.system, report)
    return 0


def _shape_key(plan: RunPlan) -> str:
    """What a build depends on: the config without its optimizer hyperparameters (`opt_*`: rates,
    betas, schedule lengths), the parallel degrees and the device. Batch sizes and GA stay out too:
    no parameter, gradient or optimizer shard depends on them."""
    cfg = {k: v for k, v in plan.config.items() if not k.startswith("opt_")}
    for k in ("global_batch_size", "micro_batch_size", "eval_micro_batch_size"):
        cfg.pop(k, None)
    lay = plan.layout
    dims = (lay.tp, lay.pp, lay.vp, lay.cp, lay.dp, lay.world_size)
    return json.dumps([plan.benchmark, cfg, dims, plan.device], sort_keys=True, default=str)
