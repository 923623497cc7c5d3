"""`mlperf diagnose RUN_DIR|LOG [--json]`: why a run is slow or not converging, with evidence."""

from __future__ import annotations

import json
import os

import click

from harness.core.errors import OK


@click.command()
@click.argument("target", metavar="RUN_DIR|LOG", type=click.Path())
@click.option(
    "--db",
    default=None,
    help="Ingested results database (`mlperf results ingest`) to compare the run's throughput per "
    "accelerator with the best published result (default results/db when it exists).",
)
@click.option(
    "--accelerators",
    type=click.IntRange(min=1),
    default=None,
    help="Accelerators the run used (a loose log).",
)
@click.option(
    "--accelerator",
    default=None,
    help="Accelerator model of the run, e.g. 'NVIDIA H100-SXM5-80GB' (a loose log).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def diagnose(target, db, accelerators, accelerator, as_json):
    """Apply the troubleshooting table to one run: unstable speed (network; the host for a run of
    one process, which has no collectives), data-wait share (data loading), non-converging loss
    (learning rate), out of memory (batch/parallelism), evaluation over 15 % of the time to train,
    expert load 2x its mean on a mixture of experts (routing.jsonl: the load-balancing switches),
    and throughput per accelerator against the best published result. A host busier than its
    cores during the run (host_load.json) is said as a note.

    RUN_DIR is results/runs/<bench>/<system>/<id> (log + timings.jsonl + output); a LOG may be the
    run's mlperf.log, a claimed result_<i>.txt or any published MLPerf log (its block/eval
    intervals and tracked_stats are read; in a submission tree the system JSON gives the
    accelerators). Exit 0 whether or not something was found; 2 (one line) where there is nothing
    to read: no MLPerf log line and no timings row."""
    from harness.review.diagnose import diagnose as run_diagnose
    from harness.review.results.ingest import DEFAULT_DB, load

    table = None
    if db or os.path.isdir(DEFAULT_DB):
        table = load(db or DEFAULT_DB)
    report = run_diagnose(target, table, accelerators, accelerator)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
        return OK
    from harness.commands.ui import out as _out

    out = _out()
    head = f"{report.benchmark or 'run'}: {report.source}"
    if report.status:
        head += f" (run_stop {report.status}, {report.steps} timed steps)"
    out.print(head, markup=False)
    if report.profile:
        out.print("log: " + ", ".join(f"{k}={v}" for k, v in report.profile.items()), markup=False)
    if not report.findings:
        out.print("no symptom from the troubleshooting table", markup=False)
    for f in report.findings:
        out.print(f"\n[bold]{f.symptom}[/bold] -> likely cause: {f.cause}")
        out.print(f"  evidence: {f.summary}", markup=False)
        out.print("  " + ", ".join(f"{k}={v}" for k, v in f.evidence.items()), markup=False)
        for r in f.remedy:
            out.print(f"  fix: {r}", markup=False)
    for n in report.notes:
        out.print(f"note: {n}", markup=False)
    return OK
