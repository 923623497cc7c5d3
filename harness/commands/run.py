"""`mlperf run BENCH --system NAME`: resolve, show (--dry-run) or execute, then report and score."""

from __future__ import annotations

import json
from pathlib import Path

import click

from harness.commands import options as opt
from harness.core.errors import OK, TARGET_NOT_REACHED, Interrupted

SCHEMA_VERSION = 1


@click.command()
@click.argument("benchmark")
@opt.system
@opt.size
@opt.ruleset
@opt.round_name
@click.option(
    "--runs",
    type=int,
    help="Runs to make (default: the benchmark's official count, `mlperf benchmarks list`).",
)
@click.option("--seed", type=int, help="Seed of the first run; run i uses seed+i (default: random).")
@click.option("--results-dir", default="results", show_default=True, type=opt.OUT_FOLDER)
@opt.data_dir
@opt.sets
@opt.nproc_per_node
@opt.nodes
@opt.launcher
@click.option(
    "--apply-tuning", is_flag=True, help="Run the system's node tuning commands in the job prologue."
)
@click.option(
    "--dry-run", is_flag=True, help="Print the resolved config, layout and launch command; run nothing."
)
@click.option(
    "--build",
    is_flag=True,
    help="With --dry-run: build each distinct rank shard of the config (meta device, no GPU) and "
    "print its parameters and bytes per rank against the planner's memory model.",
)
@click.option(
    "--resume",
    "resume_dir",
    metavar="RUN_DIR",
    type=click.Path(file_okay=False),
    help="Continue an interrupted run (results/runs/<bench>/<system>/<id>) from its last good "
    "checkpoint; same plan, same log, same result number.",
)
@click.option(
    "--allow-extra-runs",
    is_flag=True,
    help="Claim runs into a result folder that already holds the runs a result needs (refused otherwise).",
)
@opt.as_json
def run(
    benchmark,
    system,
    size,
    ruleset,
    round_name,
    runs,
    seed,
    results_dir,
    data_dir,
    sets,
    nproc_per_node,
    nodes,
    launcher,
    apply_tuning,
    dry_run,
    build,
    as_json,
    allow_extra_runs=False,
    resume_dir=None,
):
    """Run BENCHMARK's reference implementation on a system and write MLPerf logs into RESULTS_DIR
    as an official submission tree."""
    import benchmarks
    from harness.core.errors import ConfigError
    from harness.run import execute as ex

    bench = benchmarks.get(benchmark)  # the one lookup: the object travels down
    ex.runnable(bench)  # a benchmark without an implementation: its one line before any other check
    if build and not dry_run:
        raise ConfigError("--build goes with --dry-run (it builds the model shards and runs nothing)")
    if resume_dir:
        from harness.core.runfolder import results_root
        from harness.run import resume

        _refuse_plan_options_with_resume(click.get_current_context())
        resolved = resume.resolve(resume_dir, bench, launcher, apply=not dry_run)
        results_dir = str(results_root(Path(resume_dir)))
    else:
        resolved = ex.resolve(
            bench,
            system,
            size=size,
            runs=runs,
            seed=seed,
            results_dir=results_dir,
            sets=sets,
            nproc_per_node=nproc_per_node,
            nodes=nodes,
            data_dir=data_dir,
            launcher=launcher,
            ruleset=ruleset,
            round_name=round_name,
        )
    if dry_run:
        from harness.commands.run_show import show_dry_run

        report = None
        if build:  # before anything is printed: a config that cannot build is one line
            from harness.run.build import build as build_shards

            report = build_shards([resolved])[0]
        show_dry_run(resolved, Path(results_dir), as_json, apply_tuning, build=report)
        return OK

    from harness.commands.progress import Progress

    try:
        progress = Progress(len(resolved.plans), quiet=as_json)
        results = ex.execute(
            resolved,
            Path(results_dir),
            progress,
            apply_tuning=apply_tuning,
            allow_extra_runs=allow_extra_runs,
        )
    except KeyboardInterrupt:
        raise Interrupted("interrupted: running runs were stopped and logged as aborted") from None
    score = _score(resolved, results)
    if as_json:
        doc = {
            "schema_version": SCHEMA_VERSION,
            "benchmark": resolved.benchmark.name,
            "system": resolved.system.name,
            "size": resolved.plans[0].size,
            "ruleset": resolved.plans[0].ruleset,
            "submission_benchmark": resolved.plans[0].submission_benchmark,
            "division": resolved.system.division,
            "target": resolved.plans[0].target,
            "runs": [ex.as_dict(r) for r in results],
            "score_min": score,
            "status": "success" if all(r.status == "success" for r in results) else "target_not_reached",
        }
        click.echo(json.dumps(doc, indent=2))
    else:
        _table(resolved, results, score)
    return OK if all(r.status == "success" for r in results) else TARGET_NOT_REACHED


# What the saved plan fixes: a resume must retrace the interrupted run (same config, layout, seed,
# data and tree), so these options cannot change it; silently ignoring them would report a run the
# user did not ask for. --launcher, --apply-tuning, --dry-run and --json still apply.
_PLAN_OPTIONS = (
    "system",
    "size",
    "ruleset",
    "round_name",
    "runs",
    "seed",
    "results_dir",
    "data_dir",
    "sets",
    "nproc_per_node",
    "nodes",
)


def _refuse_plan_options_with_resume(ctx: click.Context) -> None:
    from click.core import ParameterSource

    from harness.core.errors import ConfigError

    given = [
        p.opts[0]  # as the user typed it: --set, --nproc-per-node
        for p in ctx.command.params
        if p.name in _PLAN_OPTIONS and ctx.get_parameter_source(p.name) not in (None, ParameterSource.DEFAULT)
    ]
    if given:
        raise ConfigError(
            f"{', '.join(given)} cannot change a resumed run (--resume continues the plan saved in "
            "RUN_DIR/plan.json): drop them, or start a new run without --resume"
        )


def _score(resolved, results) -> float | None:
    """Olympic mean once the official number of runs exists (this invocation's runs). A run that
    missed its target counts as the dropped slowest, as the rules say; two such runs: no score."""
    from harness.review.results.score import olympic_mean

    need = resolved.benchmark.rules.runs_per_result
    claimed = [r for r in results if r.result_file]
    if len(claimed) < need:
        return None
    times = [r.time_to_train_min if r.status == "success" else None for r in claimed]
    try:
        return olympic_mean(times)
    except ValueError:
        return None


def _table(resolved, results, score) -> None:
    from rich.table import Table

    from harness.commands.ui import out as _out

    out = _out()
    p = resolved.plans[0]
    t = Table(title=f"{p.submission_benchmark} on {resolved.system.name} ({p.size}, ruleset {p.ruleset})")
    for col in ("run", "seed", "status", "quality", "time-to-train (min)", "result"):
        t.add_column(col)
    for r in results:
        q = ", ".join(f"{k} {v:.4g}" for k, v in r.quality.items()) or "-"
        ttt = f"{r.time_to_train_min:.4f}" if r.time_to_train_min is not None else "-"
        t.add_row(str(r.run + 1), str(r.seed), r.status, q, ttt, r.result_file or f"(see {r.run_dir})")
    out.print(t)
    for r in results:  # power mode: the readings and GPU telemetry, or why a result has no energy
        if r.power:
            out.print(f"run {r.run + 1} power: {r.power}", markup=False, highlight=False)
    need = resolved.benchmark.rules.runs_per_result
    if score is not None:
        out.print(
            f"score (olympic mean of {len(results)} runs, fastest and slowest dropped): {score:.4f} min"
        )
    elif sum(1 for r in results if r.result_file) >= need:
        out.print("score: none (more than one run missed the target; the olympic mean allows one)")
    else:
        out.print(f"score: needs {need} completed runs (this invocation made {len(results)})")
