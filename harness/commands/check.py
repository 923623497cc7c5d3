"""`mlperf check PATH [--ruleset X.Y.Z | --round vX.Y] [--json]`: the official checkers, readable.

Without --ruleset/--round each log's and result folder's ruleset is inferred (the round in its
path, e.g. training_results_v5.0 -> 5.0.0; else its benchmark) and shown beside its verdict.

Exit 0 when everything passes, 4 when anything fails, 2 for bad usage (missing path, unknown
ruleset). stdout carries the result (problem lines + summary table, or one JSON document).

`--json` document (schema_version 1; fields are only ever added):
  schema_version, path, ruleset, kind (log | logs | tree), passed, exit_code, seconds,
  counts {logs, logs_failed, errors, warnings},
  logs[]     {path, rules, ruleset, ruleset_source, passed, crashed, tiny, benchmark, division,
             seconds, findings[]},
  findings[] tree-level: {file, line, tool, severity, message, fix, detail},
  tools[]    what ran on the tree: {tool, target, passed, errors, warnings, ruleset, [ruleset_source,
             benchmark, division, rcp, seed, scaling_factor]},
  skipped[]  files in a folder without MLLOG lines.
A finding's `tool` is compliance | package | system-desc | seed | rcp | harness; `detail` holds the
official tool's full text.
"""

from __future__ import annotations

import json
import sys

import click

from harness.review.check import Report, check_path


@click.command("check")
@click.argument("path", type=click.Path(exists=False))
@click.option(
    "--ruleset",
    default=None,
    metavar="X.Y.Z",
    help="Training ruleset of the installed mlperf-logging to check against (default: inferred per log "
    "and folder: the log's own harness_ruleset, else the round in its path, else its benchmark, else "
    "4.0.0; tiny logs use that ruleset's tiny rules, benchmarks/tiny_rules.py).",
)
@click.option("--round", "round_name", default=None, help="Round of the logs, e.g. v5.0 (ruleset 5.0.0).")
@click.option(
    "--power-gaps",
    type=click.Choice(["warning", "error"]),
    default="warning",
    show_default=True,
    help="Severity of gaps over 1 s between power readings (the power lint; published logs have them).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (schema_version 1) on stdout.")
def check(path, ruleset, round_name, power_gaps, as_json):
    """Check a log, a folder of logs, a result folder, a submitter folder or a whole submission
    tree with the official MLPerf checkers (compliance on every log; package, system-description,
    seed and RCP checkers on trees; the power lint on a result folder's power/ logs: >= 60 in-run
    samples per node, gaps <= 1 s, a window bracketing the run, increasing stamps, host set,
    conversion_eff in (0, 1], the same node count in every run, no stray files).

    \b
    Examples:
      mlperf check results/MyOrg/results/cpu-local/gpt3/result_0.txt
      mlperf check results/MyOrg            # a submitter folder: every checker
      mlperf check logs/ --json             # CI: one JSON document, exit 4 on failure

    Exit codes: 0 all pass, 4 some check failed (stderr's last line: `error:` and the first
    finding with its file), 2 bad usage.
    """
    report = check_path(path, ruleset, round_name, power_gaps)
    if as_json:
        sys.stdout.write(json.dumps(report.to_json(), indent=1, default=str) + "\n")
    else:
        render(report)
    line = report.failure_line()
    if line:  # after the table: stderr's last line says what failed and where (exit 4)
        sys.stdout.flush()
        sys.stderr.write(f"error: {' '.join(line.split())}\n")
    return report.exit_code


def render(report: Report) -> None:
    import os

    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)
    base = report.path if os.path.isdir(report.path) else os.path.dirname(report.path)
    for f in report.all_findings():
        style = "red" if f.severity == "error" else "yellow"
        console.print(f.one_line(), style=style, markup=False)
    table = Table(title=f"mlperf check ({report.kind}, ruleset {report.ruleset})", title_justify="left")
    for col in ("file", "benchmark", "division", "rules", "result", "errors", "warnings"):
        table.add_column(col, overflow="fold")
    for r in report.logs:
        rules = "tiny" if r.tiny else f"{r.ruleset} ({r.ruleset_source})"
        result = "PASS" if r.passed else ("CRASH" if r.crashed else "FAIL")
        n_err = sum(f.severity == "error" for f in r.findings)
        n_warn = len(r.findings) - n_err
        # Displays are already relative to what was checked; only absolute ones are shortened.
        name = os.path.relpath(r.path, os.path.abspath(base)) if os.path.isabs(r.path) else r.path
        table.add_row(
            name,
            str(r.benchmark or "?"),
            str(r.division or "?"),
            rules,
            f"[green]{result}[/]" if r.passed else f"[red]{result}[/]",
            str(n_err),
            str(n_warn),
        )
    for t in report.tools:
        ok = t.get("passed")
        what = (
            t["tool"]
            + (f" {t['ruleset']}" if t.get("ruleset") else "")
            + (f" (RCP: {t['rcp']})" if t.get("rcp") else "")
        )
        table.add_row(
            t.get("target", ""),
            t.get("benchmark") or "",
            t.get("division") or "",
            what,
            "[green]PASS[/]" if ok else ("[red]FAIL[/]" if ok is False else "-"),
            str(t.get("errors", "")),
            str(t.get("warnings", "")),
        )
    console.print(table)
    if report.skipped:
        console.print(
            f"skipped {len(report.skipped)} files without ':::MLLOG ' lines: "
            + ", ".join(report.skipped[:5])
            + (" ..." if len(report.skipped) > 5 else ""),
            markup=False,
        )
    n_fail = sum(not r.passed for r in report.logs)
    verdict = "[green]all checks passed[/]" if report.passed else "[red]checks failed[/]"
    console.print(
        f"{verdict}: {len(report.logs)} logs, {n_fail} failing, "
        f"{sum(f.severity == 'error' for f in report.all_findings())} errors "
        f"({report.seconds:.1f} s)"
    )
