"""`mlperf check PATH [--ruleset X.Y.Z | --round vX.Y] [--json]`: the official checkers, readable.

Without --ruleset/--round each log's and result folder's ruleset is inferred: a log's own
harness_ruleset, the round in its path (training_results_v5.0 -> 5.0.0), for a tree of published
logs the newest ruleset listing all its benchmarks (said once), else the newest listing the
benchmark, as `mlperf run` takes it; logs that then miss the keys newer rules added are one
finding ("look like <= X logs"), not one per key and log.

Text: one row per result folder for a tree (one per log for a folder of logs), then the findings
in cause order under the folder that holds them.

Exit 0 when everything passes, 4 when anything fails, 2 for bad usage (missing path, unknown
ruleset). stdout carries the result (problem lines + summary table, or one JSON document).

`--json` document (schema_version 1; fields are only ever added):
  schema_version, path, ruleset, kind (log | logs | tree), passed, exit_code, seconds,
  counts {logs, logs_failed, errors, warnings},
  logs[]     {path, rules, ruleset, ruleset_source, passed, crashed, tiny, benchmark, division,
             seconds, findings[]},
  findings[] tree-level: {file, line, tool, severity, message, fix, detail},
  all_findings[] every finding (logs' and tree-level) in cause order, `file` relative to the
             checked folder,
  tools[]    what ran on the tree: {tool, target, passed, errors, warnings, ruleset, [ruleset_source,
             benchmark, division, rcp, seed, scaling_factor]},
  skipped[]  files in a folder without MLLOG lines.
A finding's `tool` is compliance | package | system-desc | seed | rcp | harness; `detail` holds the
official tool's full text.
"""

from __future__ import annotations

import json
import os
import re
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
    """The verdict table, then the findings in cause order (stdout). A tree gets one row per
    result folder (a 96-log tree is a dozen rows, not a hundred); a folder of logs one per log.
    Findings that say the same thing of many files are one line with their count."""
    from rich.text import Text

    from harness.commands.tables import show, stdout

    console = stdout(160, highlight=False)
    title = f"mlperf check ({report.kind}, ruleset {report.ruleset})"
    if report.kind == "tree":
        cols, rows, how = _folder_rows(report)
    else:
        cols, rows, how = _log_rows(report)
    if report.kind == "tree" and how and all(why.startswith("round folder") for _rs, why in how):
        drop = [c.name for c in cols].index("ruleset")  # each folder's path says it: no column
        cols, rows = cols[:drop] + cols[drop + 1 :], [r[:drop] + r[drop + 1 :] for r in rows]
        how = [
            (
                "of each folder",
                "its round folder's (" + ", ".join(f"{w.split()[-1]} {rs}" for rs, w in how) + ")",
            )
        ]
    show(console, title, cols, rows, note="row")
    if how:
        console.print(Text("ruleset " + "; ".join(f"{rs}: {why}" for rs, why in how), style="dim"))
    if report.skipped:
        console.print(
            f"skipped {len(report.skipped)} files without ':::MLLOG ' lines: "
            + ", ".join(report.skipped[:5])
            + (" ..." if len(report.skipped) > 5 else ""),
            markup=False,
        )
    folders = [r[0] for r in rows] if report.kind == "tree" else []
    for head, lines in _finding_lines(report.all_findings(), folders):
        if head:
            console.print(Text(head + ":", style="bold"))
        for line, severity in lines:
            console.print(Text(line, style="red" if severity == "error" else "yellow"))
    n_fail = sum(not r.passed for r in report.logs)
    verdict = "[green]all checks passed[/]" if report.passed else "[red]checks failed[/]"
    console.print(
        f"{verdict}: {len(report.logs)} logs, {n_fail} failing, "
        f"{sum(f.severity == 'error' for f in report.all_findings())} errors "
        f"({report.seconds:.1f} s)"
    )


def _verdict(passed: bool | None, crashed: bool = False):
    from rich.text import Text

    if passed is None:
        return Text("-")
    return Text("PASS", style="green") if passed else Text("CRASH" if crashed else "FAIL", style="red")


def _folder_rows(report: Report):
    """One row per result folder: its logs, how many fail, its ruleset, its system JSON's and the
    package checker's verdict, errors and warnings (the folder's and its logs')."""
    from harness.commands.tables import Col

    cols = [
        Col("result folder", left=True, key=True),
        Col("division", left=True, brief="div"),
        Col("logs"),
        Col("failing", brief="fail"),
        Col("ruleset", left=True),
        Col("system JSON", left=True, brief="system"),
        Col("result", left=True),
        Col("errors", brief="err"),
        Col("warnings", brief="warn"),
    ]
    systems = {t["target"]: t.get("passed") for t in report.tools if t["tool"] == "system-desc checker"}
    rows, how = [], {}
    for t in report.tools:
        if t["tool"] != "package checker":
            continue
        folder = t["target"]
        logs = [r for r in report.logs if os.path.dirname(r.path) == folder]
        errors = sum(f.severity == "error" for r in logs for f in r.findings) + t.get("errors", 0)
        warnings = sum(f.severity == "warning" for r in logs for f in r.findings) + t.get("warnings", 0)
        org, _, rest = folder.rpartition("results/")
        system = rest.split("/")[0]
        sj = next((ok for path, ok in systems.items() if path == f"{org}systems/{system}.json"), None)
        how.setdefault(t.get("ruleset"), t.get("ruleset_source"))
        passed = bool(t.get("passed")) and all(r.passed for r in logs)
        rows.append(
            [
                folder,
                t.get("division") or "?",
                str(len(logs)),
                str(sum(not r.passed for r in logs)),
                t.get("ruleset") or "?",
                _verdict(sj),
                _verdict(passed),
                str(errors),
                str(warnings),
            ]
        )
    return cols, rows, sorted((rs, why) for rs, why in how.items() if rs and why)


def _log_rows(report: Report):
    from harness.commands.tables import Col

    cols = [
        Col("file", left=True, key=True),
        Col("benchmark", left=True),
        Col("division", left=True, brief="div"),
        Col("ruleset", left=True),
        Col("result", left=True),
        Col("errors", brief="err"),
        Col("warnings", brief="warn"),
    ]
    base = report.path if os.path.isdir(report.path) else os.path.dirname(report.path)
    rows, how = [], {}
    for r in report.logs:
        how.setdefault("tiny rules of " + str(r.ruleset) if r.tiny else r.ruleset, r.ruleset_source)
        n_err = sum(f.severity == "error" for f in r.findings)
        # displays are already relative to what was checked; only absolute ones are shortened
        name = os.path.relpath(r.path, os.path.abspath(base)) if os.path.isabs(r.path) else r.path
        rows.append(
            [
                name,
                str(r.benchmark or "?"),
                str(r.division or "?"),
                f"{r.ruleset} tiny" if r.tiny else str(r.ruleset),
                _verdict(r.passed, r.crashed),
                str(n_err),
                str(len(r.findings) - n_err),
            ]
        )
    return cols, rows, sorted((str(rs), why) for rs, why in how.items() if rs and why)


def _finding_lines(findings, folders: list[str]) -> list[tuple[str, list[tuple[str, str]]]]:
    """[(result folder, [(line, severity)])]: the findings under the folder (a table row) that
    holds their file, each shown relative to it, indented; the others with their full path. A
    folder's findings stay in cause order. Findings that differ only in their numbers and file (a
    power lint warning on each of twenty node logs) are the first and how many more, where."""

    def home(f) -> str:
        return max((d for d in folders if f.file == d or f.file.startswith(d + "/")), key=len, default="")

    groups: dict[tuple, list] = {}
    for f in findings:
        key = (home(f), f.severity, f.tool, re.sub(r"\d+(\.\d+)?", "#", f.message), f.fix)
        groups.setdefault(key, []).append(f)
    out: dict[str, list[tuple[str, str]]] = {}
    for (folder, *_), same in groups.items():
        for f in same if len(same) <= 2 else same[:1]:
            where = os.path.relpath(f.file, folder) if folder else f.file
            line = ("  " if folder else "") + f.one_line("" if where == "." else where)
            if len(same) > 2:
                under = os.path.relpath(os.path.commonpath([g.file for g in same]), folder or ".")
                line += f" (and {len(same) - 1} more like it under {under})"
            out.setdefault(folder, []).append((line, f.severity))
    return list(out.items())
