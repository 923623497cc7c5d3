"""`mlperf results score|ingest|compare`: official-grade scores and round-over-round analysis.

stdout carries the result (a rich table or one JSON document with `schema_version`); problems
found while scoring go to stderr as `warning:` lines. Exit 0, or 2 for bad usage.
"""

from __future__ import annotations

import csv
import json
import os
import sys

import click

from harness.core.errors import ConfigError

SCHEMA_VERSION = 1


@click.group("results")
def results():
    """Score results, ingest published rounds, compare rounds."""


def _fmt(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def _dump(doc):
    sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")


@results.command("score")
@click.argument("path", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="Also write one CSV row per result.")
@click.option("--runs/--no-runs", "with_runs", default=True, help="Include per-run details in --json.")
@click.option(
    "--compliance",
    "ruleset",
    default=None,
    metavar="RULESET",
    help="Also run the compliance checker (e.g. 4.0.0) and drop failing logs, as the official "
    "summarizer does (slower).",
)
def score(path, as_json, csv_path, with_runs, ruleset):
    """Score a result folder, a submitter folder, a submission tree or a published round.

    \b
    Score = olympic mean of per-run minutes (drop fastest and slowest) x committed scaling.json,
    equal to the official result summarizer (mlperf-logging 4.1.68) on compliant logs; a run
    whose run_stop status is not success counts as not converged (see harness/review/results/score.py).
    Example: mlperf results score ../shared/fixtures/mlperf_v4.0 --json
    """
    from harness.review.results.score import score_tree

    if not os.path.exists(path):
        raise ConfigError(f"no such file or directory: {path}")
    if os.path.isfile(path):
        raise ConfigError(
            f"{path} is a file: score takes a result folder (<org>/results/<system>/<benchmark>/) "
            "or a folder above it; for one log use `mlperf check`"
        )
    if ruleset:
        from harness.review.check.log import validate_ruleset

        validate_ruleset(ruleset)
    rows = score_tree(path, with_runs=with_runs and as_json, compliance=ruleset)
    if not rows:
        raise ConfigError(f"no result folders (with result_*.txt) under {path}")
    for r in rows:
        for p in r["problems"]:
            click.echo(f"warning: {r['submitter'] or '-'}/{r['system']}/{r['benchmark']}: {p}", err=True)
    if csv_path:
        _write_csv(rows, csv_path)
    if as_json:
        _dump({"schema_version": SCHEMA_VERSION, "path": path, "results": rows})
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    t = Table(title=f"MLPerf scores under {path}", title_justify="left")
    for c in (
        "submitter",
        "system",
        "benchmark",
        "division",
        "availability",
        "accelerator",
        "n",
        "runs",
        "minutes per run",
        "olympic mean",
        "scaling",
        "score (min)",
    ):
        t.add_column(
            c,
            justify="right" if c in ("n", "runs", "olympic mean", "scaling", "score (min)") else "left",
            overflow="fold",
        )
    for r in rows:
        mins = " ".join("x" if m is None else f"{m:.2f}" for m in r["run_minutes"])
        t.add_row(
            r["submitter"] or "-",
            r["system"],
            r["benchmark"],
            r["division"] or "-",
            r["availability"] or "-",
            r["accelerator"] or "-",
            str(r["accelerators"] or "-"),
            str(r["runs"]),
            mins,
            _fmt(r["olympic_mean_min"]),
            f"{r['scaling_factor']:.4f}",
            f"[bold]{_fmt(r['score_min'])}[/]" if r["score_min"] is not None else "[red]invalid[/]",
        )
    console.print(t)
    return 0


def _write_csv(rows, path):
    cols = [
        "submitter",
        "system",
        "benchmark",
        "division",
        "availability",
        "accelerator",
        "accelerators",
        "runs",
        "olympic_mean_min",
        "scaling_factor",
        "score_min",
        "run_minutes",
        "problems",
    ]
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow([json.dumps(r[c]) if isinstance(r[c], list) else r[c] for c in cols])
    os.replace(tmp, path)


@results.command("ingest")
@click.argument("round_root", type=click.Path())
@click.option("--round", "round_name", required=True, help="Round name, e.g. v4.0.")
@click.option("--db", default=None, help="Results database folder (default results/db).")
@click.option("--json", "as_json", is_flag=True)
def ingest(round_root, round_name, db, as_json):
    """Score a published round (<root>/<Org>/results/...) into results/db/<round>/ (parquet).

    Re-ingesting a round replaces it atomically.
    Example: mlperf results ingest ../training_results_v4.0 --round v4.0
    """
    from harness.review.results.ingest import DEFAULT_DB
    from harness.review.results.ingest import ingest as do_ingest

    info = do_ingest(round_root, round_name, db or DEFAULT_DB)
    if as_json:
        _dump({"schema_version": SCHEMA_VERSION, **info})
    else:
        click.echo(
            f"ingested {info['round']}: {info['results']} results ({info['scored']} scored), "
            f"{info['runs']} runs -> {info['path']}"
        )
    return 0


@results.command("compare")
@click.option("--benchmark", "-b", required=True, help="Benchmark (official name or alias).")
@click.option(
    "--rounds", default=None, help="Comma-separated rounds, e.g. v3.0,v3.1,v4.0 (default: all ingested)."
)
@click.option(
    "--accelerator", default=None, help="Only systems whose accelerator model contains this, e.g. H100."
)
@click.option("--scale", type=int, default=None, help="Accelerator count for the matched-scale column.")
@click.option(
    "--plot", "plot_path", type=click.Path(dir_okay=False), help="Write a log-log PNG of time vs scale."
)
@click.option("--db", default=None, help="Results database folder (default results/db).")
@click.option("--json", "as_json", is_flag=True)
def compare(benchmark, rounds, accelerator, scale, plot_path, db, as_json):
    """Best score, matched-scale score, accelerator-minutes, scaling efficiency and speedup per round."""
    from harness.review.results.compare import compare as do_compare
    from harness.review.results.ingest import DEFAULT_DB, load

    benchmark = _benchmark_name(benchmark)
    df = load(db or DEFAULT_DB, [r for r in rounds.split(",") if r.strip()] if rounds else None)
    doc = do_compare(df, benchmark, accelerator, scale)
    if plot_path:
        from harness.review.results.plot import plot

        doc["plot"] = plot(df, benchmark, plot_path, accelerator)
    if as_json:
        _dump({"schema_version": SCHEMA_VERSION, **doc})
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    t = Table(
        title=f"{benchmark}" + (f" on {accelerator}" if accelerator else "") + " by round",
        title_justify="left",
    )
    ms = doc["matched_scale"]
    for c in (
        "round",
        "results",
        "best (min)",
        "best system",
        "n",
        f"at {ms or '-'} acc. (min)",
        "best acc.-min",
        "scaling eff.",
        "speedup",
        "speedup matched",
    ):
        t.add_column(c, overflow="fold")
    for r in doc["rounds"]:
        eff = (
            "-"
            if r["scaling_efficiency"] is None
            else (f"{r['scaling_efficiency']:.2f} ({r['scaling_from']}->{r['scaling_to']})")
        )
        t.add_row(
            r["round"],
            str(r["results"]),
            _fmt(r["best_score_min"]),
            f"{r['best_submitter']}/{r['best_system']}",
            str(r["best_accelerators"] or "-"),
            _fmt(r["matched_score_min"]),
            _fmt(r["best_accelerator_minutes"], 1),
            eff,
            "-" if r["speedup_best"] is None else f"{r['speedup_best']:.2f}x",
            "-" if r["speedup_matched"] is None else f"{r['speedup_matched']:.2f}x",
        )
    console.print(t)
    if plot_path:
        click.echo(f"plot: {plot_path}", err=True)
    return 0


def _benchmark_name(name: str) -> str:
    try:
        import benchmarks

        return benchmarks.get(name).name
    except ConfigError:
        raise
    except Exception:  # noqa: BLE001 - the registry is optional here: fall back to the raw name
        return name
