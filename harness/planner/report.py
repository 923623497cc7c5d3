"""A Plan as JSON (`mlperf plan --json`) and as a rich table."""

from __future__ import annotations

from harness.planner import calibration as C
from harness.planner import interval as I
from harness.planner import workloads as W
from harness.planner.hardware import DATA
from harness.planner.interval import accuracy  # data/accuracy.yaml, read once for both
from harness.planner.search import Option, Plan


def distinct(plan: Plan, top: int) -> list[Option]:
    """The best option of each distinct layout (TP, PP, VP, CP, MBS), fastest first."""
    seen, out = set(), []
    for o in plan.options:
        c = o.candidate
        key = (c.tp, c.pp, c.vp, c.cp, c.ep, c.mbs)
        if key not in seen:
            seen.add(key)
            out.append(o)
            if len(out) == top:
                break
    return out


def option_json(o: Option, plan: Plan, reasons: list[str] | None = None) -> dict:
    w = plan.workload or W.get(plan.bench)
    c, t, hw = o.candidate, o.time, plan.hardware
    per_step = dict(t["breakdown_s"])
    per_step["eval"] = t["eval_s"] / max(1, t["steps"])
    return {
        "layout": {
            "tp": c.tp,
            "pp": c.pp,
            "vp": c.vp,
            "cp": c.cp,
            **({"ep": c.ep} if w.moe is not None else {}),
            "dp": c.dp(hw.world),
            "mbs": c.mbs,
            "ga": c.ga(hw.world),
            "gbs": c.gbs,
            "recompute": c.recompute,
            "distributed_optimizer": c.distributed_optimizer,
            "fp8": c.fp8 and w.precision == "fp8",
            "fsdp": c.fsdp,
            "implementation": c.impl,
            "tp_comm_overlap": c.tp_comm_overlap and c.tp > 1,
            **({"feature_store": c.feature_store} if c.feature_store else {}),
        },
        "overrides": o.overrides(w),
        "memory_gib": {k: float(f"{v:.4g}") for k, v in o.memory_gib.items()},
        "memory_total_gib": round(sum(o.memory_gib.values()), 2),
        "step_s": round(sum(per_step.values()), 4),
        "step_breakdown_s": {k: round(v, 4) for k, v in per_step.items()},
        "steps": t["steps"],
        "evals": t.get("evals", 0),
        "samples_to_converge": round(t["samples_to_converge"], 1),
        "predicted_min": round(t["predicted_min"], 3),
        "predicted_range_min": I.range_min(t["predicted_min"], reasons or []),
    }


def interval_json(found: list[tuple[str, str]]) -> dict:
    """Why the interval is as wide as it is (`found`: interval.novelty of the plan) and how it was
    measured."""
    k = I.constants()
    fwd = accuracy().get("forward_chaining", {}).get("coverage_80", {})
    return {
        "reasons": [r for r, _ in found],
        "why": [w for _, w in found]
        or ["inside the fitted data (accelerator, stack release and scale all seen)"],
        "sigma_log": round(I.sigma([r for r, _ in found], k), 4) if k else None,
        "bias_log": k["bias"] if k else None,
        "coverage_forward_held_out": {key: v for key, v in fwd.items() if not isinstance(v, dict)},
        "calibrated_by": "python bench/bench_planner_accuracy.py (forward-chaining residuals)",
    }


def assumptions(plan: Plan) -> list[str]:
    """What the prediction assumes beyond fitted data (printed and in --json `notes`)."""
    hw, w, out = plan.hardware, plan.workload or W.get(plan.bench), list(plan.notes)
    c = plan.options[0].candidate if plan.options else None
    if w.precision == "fp8" and c is not None and not c.fp8:
        why = "has no FP8" if not hw.has_fp8() else f"is not run in FP8 by stack {plan.stack.key}"
        out.append(f"{hw.accelerator} {why}: bf16 peak, no FP8 gain")
    return out


def accuracy_json(bench: str) -> dict:
    a = accuracy()
    if not a:
        return {
            "held_out": None,
            "note": "no accuracy measured (python bench/bench_planner_accuracy.py --write)",
        }
    held = {m: {"overall": v.get("overall"), bench: v.get(bench)} for m, v in a.get("held_out", {}).items()}
    steps = a.get("forward_chaining", {}).get("steps", [])
    forward = [
        {
            "fit_on": s["fit_on"],
            "predict": s["predict"],
            "overall": s["overall"],
            bench: s["by_benchmark"].get(bench),
        }
        for s in steps
    ]
    return {
        "forward_chaining": forward,
        "held_out_note": a.get("held_out_note"),
        "held_out": held,
        "rows": a.get("rows"),
        "source": a.get("source"),
        "no_data": a.get("no_data"),
        "measured_by": "python bench/bench_planner_accuracy.py",
    }


def to_json(plan: Plan, top: int, mode: str = "search", user: dict | None = None) -> dict:
    hw = plan.hardware
    best = distinct(plan, top)
    w = plan.workload or W.get(plan.bench)
    n = w.cost.parameters(w.cfg)
    k = plan.constants
    stack = plan.stack
    found = I.novelty(plan.bench.name, hw, stack)
    reasons = [r for r, _ in found]
    return {
        "schema_version": 2,
        "benchmark": plan.bench.name,
        "size": w.size,
        "system": hw.name,
        "mode": mode,
        "ruleset": plan.ruleset,  # whose RCPs give the samples to converge
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
            "source": hw.source,
        },
        "stack": {
            "name": stack.name,
            "version": stack.version,
            "recognised_from": stack.how,
            "constants_from": k.get("stack_used"),
            "efficiency_factor": round(float(k.get("stack_factor", 1.0)), 4),
        },
        "parameters_total": n["total"],
        "parameters_trainable": n["trainable"],
        "predicted_min": best[0].time["predicted_min"] if best else None,
        "predicted_range_min": I.range_min(best[0].time["predicted_min"], reasons) if best else None,
        "interval": interval_json(found),
        "best": option_json(best[0], plan, reasons),
        "options": [option_json(o, plan, reasons) for o in best],
        "candidates_considered": plan.considered,
        "candidates_fitting": len(plan.options),
        "rejected": plan.rejected,
        "notes": assumptions(plan),
        "accuracy": accuracy_json(plan.bench.name),
        "constants": {
            "file": user["path"] if user else str(DATA / "efficiency.yaml"),
            "fitted_on_rows": len((C.efficiency_file().get("fitted_on") or {}).get("global", [])),
        },
    }
