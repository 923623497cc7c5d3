"""`mlperf lr-find BENCH --system NAME`: LR range test, plotted, with a suggested LR."""

from __future__ import annotations

import json

import click

from harness.commands import options as opt
from harness.core.errors import OK


class _Command(click.Command):
    """`--help` ends with the benchmarks that have an LR range test, read from the registry (so the
    list cannot drift from what `mlperf lr-find` runs; the registry is torch-free)."""

    def format_epilog(self, ctx, formatter):
        from harness.run.lr_find import supported

        formatter.write_paragraph()
        formatter.write_text(f"Benchmarks with an LR range test: {', '.join(supported())}.")


@click.command("lr-find", cls=_Command)
@click.argument("benchmark")
@opt.system
@opt.size
@click.option(
    "--steps",
    type=int,
    default=None,
    help="Steps of the exponential sweep (default: the benchmark's own length, from 100 to 300; "
    "the result reports the steps run).",
)
@click.option("--min-lr", default=1e-5, show_default=True, type=float)
@click.option("--max-lr", default=1.0, show_default=True, type=float)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option(
    "--results-dir",
    default="results",
    show_default=True,
    type=opt.OUT_FOLDER,
    help="Artifacts go to RESULTS_DIR/lr-find/<bench>/<system>/<stamp>/ (never the submission tree).",
)
@click.option("--out-dir", type=opt.OUT_FOLDER, help="Exact folder for the artifacts instead.")
@opt.data_dir
@opt.sets
@opt.nproc_per_node
@opt.launcher
@click.option("--no-plot", is_flag=True, help="Skip the PNG.")
@opt.as_json
def lr_find(
    benchmark,
    system,
    size,
    steps,
    min_lr,
    max_lr,
    seed,
    results_dir,
    out_dir,
    data_dir,
    sets,
    nproc_per_node,
    launcher,
    no_plot,
    as_json,
):
    """Sweep BENCHMARK's learning rate exponentially from --min-lr to --max-lr over --steps steps (from the
    run's starting checkpoint), smooth the loss, plot loss vs LR and suggest a peak LR (half the
    LR at the smoothed minimum; see harness/run/lr_find.py). Use it with
    `mlperf run BENCH --set opt_base_learning_rate=LR`."""
    import benchmarks
    from harness.run import lr_find as lf

    res = lf.run(
        benchmarks.get(benchmark),
        system,
        steps,
        min_lr,
        max_lr,
        out_dir,
        make_plot=not no_plot,
        size=size,
        seed=seed,
        results_dir=results_dir,
        sets=sets,
        nproc_per_node=nproc_per_node,
        data_dir=data_dir,
        launcher=launcher,
    )
    if as_json:
        doc = {"schema_version": 1, **res.to_dict()}
        click.echo(json.dumps(doc, indent=2))
        return OK
    from rich.table import Table

    from harness.commands.ui import out as _out

    out = _out()
    t = Table(title=f"LR range test: {res.benchmark} on {res.system} ({res.steps_run} steps)")
    t.add_column("lr", justify="right")
    t.add_column("loss", justify="right")
    t.add_column("smoothed", justify="right")
    n = len(res.lrs)
    for i in sorted({int(k * (n - 1) / 12) for k in range(13)}):
        raw, sm = res.losses[i], res.smoothed[i]
        t.add_row(
            f"{res.lrs[i]:.3g}", "-" if raw is None else f"{raw:.4f}", "-" if sm is None else f"{sm:.4f}"
        )
    out.print(t)
    if res.suggested_lr:
        out.print(
            f"suggested LR: {res.suggested_lr:.3g} (minimum of the smoothed loss at {res.lr_at_min:.3g} / 2; "
            f"steepest descent at {res.steepest_lr:.3g}; configured {res.configured_lr:.3g})"
            if res.steepest_lr
            else f"suggested LR: {res.suggested_lr:.3g} (minimum at {res.lr_at_min:.3g} / 2)",
            markup=False,
        )
        out.print(
            f"try: mlperf run {res.benchmark} --system {res.system} --set opt_base_learning_rate={res.suggested_lr:.3g}",
            markup=False,
        )
    for note in res.notes:
        out.print(f"note: {note}", markup=False)
    if res.png:
        out.print(f"plot: {res.png}", markup=False)
    out.print(f"artifacts: {res.out_dir}", markup=False)
    return OK
