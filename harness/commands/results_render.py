"""Text of `mlperf results score` and `mlperf results compare`: tables (commands/tables.py: no
number is ever cut, at any width) and the `warning:` lines about results published twice."""

from __future__ import annotations

import click
from rich.text import Text

from harness.commands import tables
from harness.commands.tables import Col


def _fmt(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def _x(v):
    return "-" if v is None else f"{v:.2f}x"


def _short_acc(name: str) -> str:
    from harness.review.results.compare import short_accelerator

    return name if name == "-" else short_accelerator(name)


def score_table(rows: list[dict], path: str, rcp: bool) -> None:
    """One row per result folder; each run's minutes are in --json and --csv (ten of them made
    one cell that rich folded over five lines)."""
    cols = [Col("submitter", left=True, key=True), Col("system", left=True, key=True)]
    cols += [Col("benchmark", left=True, key=True), Col("ruleset", left=True), Col("division", left=True)]
    cols += [Col("accelerator", left=True, short=_short_acc, brief="acc."), Col("n"), Col("runs")]
    cols += [Col("scaling", brief="scale"), Col("score (min)"), Col("energy (MJ)")]
    cols += [Col("RCP", left=True), Col("RCP factor")] if rcp else []
    cells = []
    for r in rows:
        counted = sum(m is not None for m in r["run_minutes"])
        score = (
            Text(_fmt(r["score_min"]), style="bold") if r["score_min"] is not None else Text("invalid", "red")
        )
        cells.append(
            [
                r["submitter"] or "-",
                r["system"],
                r["benchmark"],
                r["ruleset"],
                r["division"] or "-",
                r["accelerator"] or "-",
                str(r["accelerators"] or "-"),
                # counted of all when some do not count (the olympic mean drops them as slowest)
                str(r["runs"]) if counted == r["runs"] else f"{counted}/{r['runs']}",
                f"{r['scaling_factor']:.4f}",
                score,
                "-" if r["energy_j"] is None else f"{r['energy_j'] / 1e6:.3f}",
            ]
            + ([r["rcp"] or "-", _fmt(r["rcp_factor"], 4)] if rcp else [])
        )
    tables.show(tables.stdout(), f"MLPerf scores under {path}", cols, cells, note="result")


def warn_score_duplicates(rows: list[dict]) -> None:
    from harness.review.results.compare import result_name

    for r in rows:
        if r.get("duplicate_of"):
            then = "both scored here; `mlperf results compare` counts it once"
            _warn_twice(result_name(r), r["duplicate_of"], r["duplicate_runs"], r["runs"], "", then)


def warn_compare_duplicates(doc: dict) -> None:
    for d in doc.get("duplicates") or []:
        then = f"counted once, as {d['kept']}"
        _warn_twice(d["dropped"], d["kept"], d["shared_runs"], d["runs"], f"{d['round']}: ", then)


def _warn_twice(copy: str, kept: str, shared: int, runs: int, where: str, then: str) -> None:
    """One line naming both folders: the same runs (run_start and run_stop to the millisecond)."""
    click.echo(
        f"warning: {where}{copy} and {kept} are one result published twice ({shared} of its {runs} runs "
        f"have the same run_start and run_stop): {then}",
        err=True,
    )


def compare_table(doc: dict) -> None:
    energy = doc["by"] == "energy"
    names = "/".join(doc["names"])
    title = f"{names}" + (f" on {doc['accelerator']}" if doc["accelerator"] else "")
    title += " by round, ranked by " + ("energy to train" if energy else "time to train")
    ms = doc["matched_scale"]
    unit = "MJ" if energy else "min"
    cols = [Col("round", left=True, key=True), Col("benchmark", left=True), Col("ruleset", left=True)]
    cols += [Col("results"), Col(f"best ({unit})"), Col("best system", left=True), Col("n")]
    cols += [Col(f"at {ms or '-'} acc. ({unit})"), Col("kJ per acc." if energy else "best acc.-min")]
    cols += [] if energy else [Col("scaling eff.")]
    cols += [Col("time (min)" if energy else "energy (MJ)"), Col("speedup best"), Col("speedup matched")]
    cols += [Col("like for like")]
    scale = 1e-6 if energy else 1.0
    cells = []
    for r in doc["rounds"]:
        row = [
            r["round"],
            r["benchmark"],
            str(r["ruleset"] or "-"),
            str(r["results"]),
            _fmt(r["best"] * scale),
            f"{r['best_submitter']}/{r['best_system']}",
            str(r["best_accelerators"] or "-"),
            _fmt(None if r["matched"] is None else r["matched"] * scale),
            _fmt(
                None
                if r["best_per_accelerator"] is None
                else r["best_per_accelerator"] * (1e-3 if energy else 1),
                1,
            ),
        ]
        if not energy:
            eff = r["scaling_efficiency"]
            row.append("-" if eff is None else f"{eff:.2f} ({r['scaling_from']}->{r['scaling_to']})")
            row.append(_fmt(None if r["best_energy_j"] is None else r["best_energy_j"] / 1e6))
        else:
            row.append(_fmt(r["best_score_min"]))
        row += [_vs(r, "speedup_best"), _vs(r, "speedup_matched"), _like(r.get("speedup_like"))]
        cells.append(row)
    tables.show(tables.stdout(), title, cols, cells, note="round")
    tables.stdout().print(
        "speedups over the previous round only between the same accelerator at the same count; "
        "'- (A vs B)' names two results that are not alike",
        markup=False,
        highlight=False,
    )


def _vs(r: dict, key: str) -> str:
    """The speedup, or '-' naming the two results it would compare when they are not alike."""
    unlike = r.get(key + "_unlike")
    return f"- ({unlike})" if unlike else _x(r.get(key))


def _like(v: dict | None) -> str:
    return "-" if not v else f"{v['speedup']:.2f}x ({v['accelerators']} {v['accelerator']})"
