"""A Plan as JSON (`mlperf plan --json`) and as a rich table."""

from __future__ import annotations

import sys

from harness.planner import calibration as C
from harness.planner import workloads as W
from harness.planner.search import Option, Plan


def distinct(plan: Plan, top: int) -> list[Option]:
    """The best option of each distinct layout (TP, PP, VP, CP, MBS), fastest first."""
    seen, out = set(), []
    for o in plan.options:
        c = o.candidate
        key = (c.tp, c.pp, c.vp, c.cp, c.mbs)
        if key not in seen:
            seen.add(key)
            out.append(o)
            if len(out) == top:
                break
    return out


def option_json(o: Option, plan: Plan) -> dict:
    w = W.get(plan.bench)
    c, t, hw = o.candidate, o.time, plan.hardware
    per_step = dict(t["breakdown_s"])
    per_step["eval"] = t["eval_s"] / t["steps"]
    return {
        "layout": {
            "tp": c.tp,
            "pp": c.pp,
            "vp": c.vp,
            "cp": c.cp,
            "dp": c.dp(hw.world),
            "mbs": c.mbs,
            "ga": c.ga(hw.world),
            "gbs": c.gbs,
            "recompute": c.recompute,
            "distributed_optimizer": c.distributed_optimizer,
            "fp8": c.fp8 and w.precision == "fp8",
            "tp_comm_overlap": c.tp_comm_overlap and c.tp > 1,
            **({"feature_store": c.feature_store} if c.feature_store else {}),
        },
        "overrides": o.overrides(w),
        "memory_gib": {k: round(v, 2) for k, v in o.memory_gib.items()},
        "memory_total_gib": round(sum(o.memory_gib.values()), 2),
        "step_s": round(sum(per_step.values()), 4),
        "step_breakdown_s": {k: round(v, 4) for k, v in per_step.items()},
        "steps": t["steps"],
        "samples_to_converge": round(t["samples_to_converge"], 1),
        "predicted_min": round(t["predicted_min"], 3),
    }


def assumptions(plan: Plan) -> list[str]:
    hw, k = plan.hardware, C.constants()
    out = []
    if hw.family not in k["family"]:
        out.append(
            f"no published results for the '{hw.family}' family: its efficiency per peak FLOP "
            f"is assumed equal to Hopper's"
        )
    if W.get(plan.bench).precision == "fp8" and not hw.has_fp8():
        out.append(f"{hw.accelerator} has no FP8: bf16 at {k['fp8_gain']}x the FP8-relative efficiency")
    return out


def to_json(plan: Plan, top: int) -> dict:
    hw = plan.hardware
    best = distinct(plan, top)
    eff = C.efficiency_file()
    return {
        "schema_version": 1,
        "benchmark": plan.bench,
        "system": hw.name,
        "hardware": {
            "accelerator": hw.accelerator,
            "family": hw.family,
            "nodes": hw.nodes,
            "accelerators_per_node": hw.per_node,
            "world": hw.world,
            "scale_up_domain": hw.domain,
            "memory_gib": round(hw.memory_gib, 2),
            "peak_tflops": hw.peak_tflops,
            "intra_gbs": hw.intra_gbs,
            "inter_gbs": hw.inter_gbs,
        },
        "predicted_min": best[0].time["predicted_min"] if best else None,
        "best": option_json(best[0], plan),
        "options": [option_json(o, plan) for o in best],
        "candidates_considered": plan.considered,
        "candidates_fitting": len(plan.options),
        "rejected": plan.rejected,
        "assumptions": assumptions(plan),
        "calibration": {"fitted_on": eff.get("fitted_on", []), "fit_error": eff.get("fit_error", {})},
    }


def render(plan: Plan, doc: dict, top: int) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
    hw = doc["hardware"]
    title = (
        f"mlperf plan {plan.bench} on {doc['system']}: {hw['nodes']} x {hw['accelerators_per_node']} "
        f"{hw['accelerator']} ({hw['world']} accelerators, {hw['memory_gib']:.0f} GiB each)"
    )
    table = Table(title=title, title_justify="left")
    cols = [
        "#",
        "TP",
        "PP",
        "VP",
        "CP",
        "DP",
        "MBS",
        "GA",
        "GBS",
        "recompute",
        "mem GiB",
        "compute s",
        "TP/CP s",
        "bubble s",
        "DP exp. s",
        "other s",
        "eval s",
        "step s",
        "samples",
        "minutes",
    ]
    for col in cols:
        table.add_column(col, justify="right" if col not in ("recompute",) else "left")
    for i, o in enumerate(doc["options"], 1):
        lay, b = o["layout"], o["step_breakdown_s"]
        table.add_row(
            str(i),
            str(lay["tp"]),
            str(lay["pp"]),
            str(lay["vp"]),
            str(lay["cp"]),
            str(lay["dp"]),
            str(lay["mbs"]),
            str(lay["ga"]),
            str(lay["gbs"]),
            lay["recompute"],
            f"{o['memory_total_gib']:.1f}",
            f"{b['compute']:.3f}",
            f"{b['tp']:.3f}",
            f"{b['pp_bubble']:.3f}",
            f"{b['dp_exposed']:.3f}",
            f"{b['overhead'] + b.get('gather', 0.0):.3f}",
            f"{b['eval']:.3f}",
            f"{o['step_s']:.3f}",
            f"{o['samples_to_converge']:,.0f}",
            f"[bold]{o['predicted_min']:.2f}[/]",
        )
    console.print(table)
    console.print(
        "per step: compute, TP/CP collectives, pipeline bubble + sends, exposed DP traffic, other "
        "(fixed overhead; gnn: + feature gathering), evaluation; samples to converge from the RCPs",
        markup=False,
        style="dim",
    )
    best = doc["best"]
    mem = ", ".join(f"{k} {v:.1f}" for k, v in best["memory_gib"].items())
    console.print(
        f"best: predicted {best['predicted_min']:.2f} min; memory per accelerator (GiB): {mem}", markup=False
    )
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
    for a in doc["assumptions"]:
        console.print(f"assumption: {a}", markup=False, style="yellow")
