"""`mlperf plan` on a terminal: the planner's JSON document drawn as rich tables and lines (the
planner itself never prints)."""

from __future__ import annotations


def render(plan, doc: dict, top: int) -> None:
    """The layout table and what the planner says about it (the `--json` document, drawn)."""
    from rich.console import Console
    from rich.text import Text

    from harness.commands import tables
    from harness.commands.tables import Col

    # piped with no COLUMNS: 200 wide and lines never wrapped (one line a fact, for grep);
    # a terminal or a set COLUMNS: lines wrap at spaces, so no number is split at the edge
    width = tables.width(200)
    console = Console(highlight=False, soft_wrap=width is not None, width=width)
    hw = doc["hardware"]
    title = (
        f"mlperf plan {plan.bench.name} on {doc['system']}: {hw['nodes']} x {hw['accelerators_per_node']} "
        f"{hw['accelerator']} ({hw['world']} accelerators, {hw['memory_gib']:.0f} GiB each)"
    )
    moe = any("ep" in o["layout"] for o in doc["options"])  # a mixture of experts: EP and its all-to-all
    degrees = ("tp", "pp", "vp", "cp", *(("ep",) if moe else ()), "dp", "mbs", "ga", "gbs")
    cols = [Col("#", key=True)] + [Col(c.upper()) for c in degrees]
    cols += [Col("recompute", left=True)]
    parts = ("compute", "tp", *(("ep_a2a",) if moe else ()), "pp_bubble", "dp_exposed")
    heads = {"compute": "compute s", "tp": "TP/CP s", "ep_a2a": "EP a2a s", "pp_bubble": "bubble s"}
    cols += [Col("mem GiB")] + [Col(heads.get(p, "DP exp. s")) for p in parts] + [Col("other s")]
    cols += [Col(c) for c in ("eval s", "step s", "samples", "minutes", "80 % range")]
    rows = []
    for i, o in enumerate(doc["options"], 1):
        lay, b = o["layout"], o["step_breakdown_s"]
        rows.append(
            [str(i)]
            + [str(lay[k]) for k in degrees]
            + [lay["recompute"], f"{o['memory_total_gib']:.1f}"]
            + [f"{b[k]:.3f}" for k in parts]
            + [
                f"{b['overhead'] + b.get('gather', 0.0) + b.get('fsdp', 0.0):.3f}",
                f"{b['eval']:.3f}",
                f"{o['step_s']:.3f}",
                f"{o['samples_to_converge']:,.0f}",
                Text(f"{o['predicted_min']:.2f}", style="bold"),
                _range(o),
            ]
        )
    tables.show(console, title, cols, rows, note="layout")
    console.print(
        f"per step: compute, TP/CP collectives, {'EP all-to-all, ' if moe else ''}pipeline bubble + sends, exposed DP traffic, other "
        "(fixed overheads; + FSDP gathers; + input gathering where the benchmark has it), evaluation; samples to converge "
        "from the RCPs (tiny: data/tiny.yaml or your calibration); `--explain` shows every term",
        markup=False,
        style="dim",
    )
    best = doc["best"]
    mem = ", ".join(f"{k} {v:.1f}" for k, v in best["memory_gib"].items())
    console.print(
        f"best: predicted {best['predicted_min']:.2f} min (80 % range {_range(best)}); memory per "
        f"accelerator (GiB): {mem}",
        markup=False,
    )
    iv = doc["interval"]
    console.print("range: " + "; ".join(iv["why"]), markup=False, style="dim")
    console.print(
        "config overrides: " + " ".join(f"{k}={v}" for k, v in best["overrides"].items()), markup=False
    )
    if doc["rejected"]:
        rej = "; ".join(f"{n} x {r}" for r, n in sorted(doc["rejected"].items(), key=lambda x: -x[1]))
        console.print(
            f"dropped {sum(doc['rejected'].values())} of {doc['candidates_considered']} candidates: {rej}",
            markup=False,
            style="dim",
        )
    if doc.get("ruleset"):
        why = (
            "tiny: samples to converge from data/tiny.yaml"
            if doc.get("size") == "tiny"
            else "samples to converge from its RCPs"
        )
        console.print(f"ruleset: {doc['ruleset']} ({why})", markup=False)
    st = doc["stack"]
    console.print(
        f"stack: {st['name']}{'@' + st['version'] if st['version'] else ''} ({st['recognised_from']}); "
        f"efficiency constants of {st['constants_from']} (factor {st['efficiency_factor']})",
        markup=False,
    )
    fwd = doc["accuracy"].get("forward_chaining") or []
    if fwd and fwd[-1].get(plan.bench.name):
        s, a = fwd[-1], fwd[-1][plan.bench.name]
        console.print(
            f"error forward in time (fit on {s['fit_on']}, predict {s['predict']}): {plan.bench.name} median "
            f"{a['median_ape']:.1f} %, p90 {a['p90_ape']:.1f} %, mean signed {a['mean_signed_pct']:+.1f} % "
            f"over {a['rows']} rows (all benchmarks: median {s['overall']['median_ape']:.1f} %, p90 "
            f"{s['overall']['p90_ape']:.1f} %)",
            markup=False,
            style="dim",
        )
    for a in doc["notes"]:
        console.print(f"note: {a}", markup=False, style="yellow")
    for t in doc.get("explain") or []:  # `--explain`: here, so that its lines wrap as the others
        console.print(f"  {t['term']:>20s} = {t['value']:.6g}   {t['formula']}", markup=False)


def _range(o: dict) -> str:
    r = o.get("predicted_range_min")
    return f"{r[0]:.2f}-{r[1]:.2f}" if r else "-"


def render_calibration(doc: dict) -> None:
    """What `mlperf plan --calibrate` fitted, run by run."""
    import click

    click.echo(
        f"calibrated stack mlperf-harness for system {doc['system']} on {len(doc['runs'])} run(s): {doc['path']}"
    )
    for r in doc["runs"]:
        m, f = r["measured"], r["fitted"]
        ev = f" eval {m['eval_s']:.3f} s (fit {f['eval_s']:.3f})" if m["eval_s"] else ""
        click.echo(f"  {r['layout']}: step {m['step_s']:.4f} s (fit {f['step_s']:.4f}){ev}")
    for key, v in doc["constants"].items():
        click.echo(f"  {key}: {v}")
