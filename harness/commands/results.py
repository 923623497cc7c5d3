"""`mlperf results score|ingest|compare`: official scores and round-over-round analysis.

stdout carries the result (a rich table or one JSON document with `schema_version`); problems
found while scoring go to stderr as `warning:` lines, one per problem, naming the folder.
Exit 0, or 2 for bad usage (unknown ruleset, round or benchmark).
"""

from __future__ import annotations

import csv
import json
import os
import sys

import click

from harness.commands import options as opt
from harness.core.errors import ConfigError

SCHEMA_VERSION = 1

_ruleset_opt = click.option(
    "--ruleset",
    default=None,
    metavar="X.Y.Z",
    help="Training ruleset of the installed mlperf-logging (default: inferred per folder from the round "
    "folder name, e.g. training_results_v5.0, else from the benchmark; shown in every row).",
)


@click.group("results")
def results():
    """Score results, ingest published rounds, compare rounds."""


def _dump(doc):
    sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")


def _warn(rows):
    for r in rows:
        for p in r["problems"]:
            click.echo(f"warning: {r['submitter'] or '-'}/{r['system']}/{r['benchmark']}: {p}", err=True)


@results.command("score")
@click.argument("path", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@click.option("--csv", "csv_path", type=opt.OUT_FILE, help="Also write one CSV row per result.")
@click.option("--runs/--no-runs", "with_runs", default=True, help="Include per-run details in --json.")
@_ruleset_opt
@click.option(
    "--round", "round_name", default=None, help="Round of the results, e.g. v5.0 (sets the ruleset 5.0.0)."
)
@click.option(
    "--check/--no-check",
    default=True,
    help="Run the official compliance check on every log and drop failing ones, as the official "
    "summarizer does (default; in parallel over the cores). --no-check is faster and counts a run "
    "by its run_stop status instead.",
)
@click.option(
    "--rcp",
    is_flag=True,
    help="Also run the official RCP check (closed division): verdict and recomputed factor.",
)
def score(path, as_json, csv_path, with_runs, ruleset, round_name, check, rcp):
    """Score a result folder, a submitter folder, a submission tree or a published round.

    \b
    Score = olympic mean of the counted runs' minutes x committed scaling.json, energy (J) the
    same way where power/ logs exist: equal to the official result summarizer (mlperf-logging
    4.1.68) for every ruleset and benchmark it knows. The tree is never modified.
    Example: mlperf results score ../training_results_v5.0 --json
    """
    from harness.core import rulesets as rules
    from harness.review.results.score import score_tree

    if not os.path.exists(path):
        raise ConfigError(f"no such file or directory: {path}")
    if os.path.isfile(path):
        raise ConfigError(
            f"{path} is a file: score takes a result folder (<org>/results/<system>/<benchmark>/) "
            "or a folder above it; for one log use `mlperf check`"
        )
    if ruleset:
        rules.validate_ruleset(ruleset)
    elif round_name:
        rules.resolve(round_name=round_name)
    rows = score_tree(
        path, with_runs=with_runs and as_json, check=check, ruleset=ruleset, round_name=round_name, rcp=rcp
    )
    if not rows:
        raise ConfigError(f"no result folders (with result_*.txt) under {path}")
    _warn(rows)
    from harness.commands import results_render as show

    show.warn_score_duplicates(rows)
    if not check:
        click.echo("note: --no-check: logs not compliance-checked; runs counted by run_stop status", err=True)
    if csv_path:
        _write_csv(rows, csv_path)
    if as_json:
        _dump({"schema_version": SCHEMA_VERSION, "path": path, "checked": check, "results": rows})
        return 0
    show.score_table(rows, path, rcp)
    return 0


_CSV = [
    "submitter",
    "system",
    "benchmark",
    "ruleset",
    "division",
    "availability",
    "accelerator",
    "accelerators",
    "runs",
    "olympic_mean_min",
    "scaling_factor",
    "score_min",
    "energy_j",
    "run_minutes",
    "problems",
]


def _write_csv(rows, path):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(_CSV)
        for r in rows:
            w.writerow([json.dumps(r[c]) if isinstance(r[c], list) else r[c] for c in _CSV])
    os.replace(tmp, path)


@results.command("ingest")
@click.argument("round_root", type=click.Path())
@click.option("--round", "round_name", required=True, help="Round name, e.g. v5.0 (also sets the ruleset).")
@_ruleset_opt
@click.option("--check/--no-check", default=True, help="Compliance-check every log (default), as `score`.")
@click.option("--db", default=None, type=opt.OUT_FOLDER, help="Results database folder (default results/db).")
@click.option("--json", "as_json", is_flag=True)
def ingest(round_root, round_name, ruleset, check, db, as_json):
    """Score a published round (<root>/<Org>/results/...) into results/db/<round>/ (parquet).

    Re-ingesting a round replaces it atomically.
    Example: mlperf results ingest ../training_results_v5.0 --round v5.0
    """
    from harness.review.results.ingest import DEFAULT_DB
    from harness.review.results.ingest import ingest as do_ingest

    info = do_ingest(round_root, round_name, db or DEFAULT_DB, ruleset=ruleset, check=check)
    if as_json:
        _dump({"schema_version": SCHEMA_VERSION, **info})
    else:
        click.echo(
            f"ingested {info['round']} (ruleset {info['ruleset']}): {info['results']} results "
            f"({info['scored']} scored, {info['with_energy']} with energy), {info['runs']} runs -> {info['path']}"
        )
        for w in info["warnings"]:
            click.echo(f"warning: {w}", err=True)
    return 0


@results.command("compare")
@click.option(
    "--benchmark",
    "-b",
    required=True,
    help="Benchmark; its names in other rulesets are included (a rename between rounds).",
)
@click.option(
    "--rounds", default=None, help="Comma-separated rounds, e.g. v4.0,v4.1,v5.0 (default: all ingested)."
)
@_ruleset_opt
@click.option(
    "--accelerator", default=None, help="Only systems whose accelerator model contains this, e.g. H100."
)
@click.option(
    "--scale",
    type=click.IntRange(min=1),
    default=None,
    help="Accelerator count for the matched-scale column.",
)
@click.option(
    "--by",
    type=click.Choice(["time", "energy"]),
    default="time",
    show_default=True,
    help="Rank by time to train or by energy to train (rounds with power results).",
)
@click.option(
    "--plot",
    "plot_path",
    type=opt.OUT_FILE,
    help="Write a PNG of time vs scale, one panel a round.",
)
@click.option("--db", default=None, help="Results database folder (default results/db).")
@click.option("--json", "as_json", is_flag=True)
def compare(benchmark, rounds, ruleset, accelerator, scale, by, plot_path, db, as_json):
    """Best score, matched-scale score, accelerator-minutes, scaling efficiency, energy and speedup per round.

    A speedup over the previous round is only printed between the same accelerator at the same
    count; otherwise the cell names both results ('- (1024 H100 vs 32 H100)'). `like for like`
    is the speedup at the fastest accelerator and count both rounds have.
    """
    from harness.commands import results_render as show
    from harness.core import rulesets as rules
    from harness.review.results.compare import compare as do_compare
    from harness.review.results.compare import dedupe
    from harness.review.results.ingest import DEFAULT_DB, load

    benchmark = rules.validate_benchmark(
        _benchmark_name(benchmark), ruleset and rules.validate_ruleset(ruleset)
    )
    df = load(db or DEFAULT_DB, [r for r in rounds.split(",") if r.strip()] if rounds else None)
    if ruleset:
        df = df[df["ruleset"] == ruleset]
    doc = do_compare(df, benchmark, accelerator, scale, by=by)
    show.warn_compare_duplicates(doc)
    if plot_path:
        from harness.review.results.plot import plot

        doc["plot"] = plot(dedupe(df)[0], benchmark, plot_path, accelerator)  # a result once, as counted
    if as_json:
        _dump({"schema_version": SCHEMA_VERSION, **doc})
        return 0
    show.compare_table(doc)
    if plot_path:
        click.echo(f"plot: {plot_path}", err=True)
    return 0


def _benchmark_name(name: str) -> str:
    """A benchmark name of mlperf-logging as given; else the harness's aliases (e.g. llama2)."""
    import benchmarks
    from harness.core import rulesets as rules

    if name in rules.all_benchmarks():
        return name
    try:
        return benchmarks.get(name).official
    except ConfigError:
        return name
