"""`mlperf diagnose RUN_DIR|LOG [--json]`: why a run is slow or not converging, with evidence."""

from __future__ import annotations

import json

import click

from harness.core.errors import OK


@click.command()
@click.argument("target", metavar="RUN_DIR|LOG", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def diagnose(target, as_json):
    """Apply the troubleshooting table to one run: unstable speed (network), data-wait share
    (data loading), non-converging loss (learning rate), out of memory (batch/parallelism).

    RUN_DIR is results/runs/<bench>/<system>/<id> (log + timings.jsonl + output); a LOG may be
    the run's mlperf.log or a claimed result_<i>.txt. Exit 0 whether or not something was found."""
    from harness.review.diagnose import diagnose as run_diagnose

    report = run_diagnose(target)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return OK
    from harness.commands.ui import out as _out

    out = _out()
    head = f"{report.benchmark or 'run'}: {report.source}"
    if report.status:
        head += f" (run_stop {report.status}, {report.steps} timed steps)"
    out.print(head, markup=False)
    if not report.findings:
        out.print("healthy: no symptom from the troubleshooting table", markup=False)
    for f in report.findings:
        out.print(f"\n[bold]{f.symptom}[/bold] -> likely cause: {f.cause}")
        out.print(f"  evidence: {f.summary}", markup=False)
        out.print("  " + ", ".join(f"{k}={v}" for k, v in f.evidence.items()), markup=False)
        for r in f.remedy:
            out.print(f"  fix: {r}", markup=False)
    for n in report.notes:
        out.print(f"note: {n}", markup=False)
    return OK
