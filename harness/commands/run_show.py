"""`mlperf run --dry-run`: the resolved config with provenance, the layout, rules and launch."""

from __future__ import annotations

import json
from pathlib import Path

import benchmarks


def rules_files(plan) -> list[str]:
    if plan.size == "tiny":
        return [str(benchmarks.TINY_RULES), str(benchmarks.folder(plan.benchmark) / "tiny_rules.yaml")]
    div = plan.submission.division
    return [
        f"mlperf_logging training_{plan.ruleset}/common.yaml",
        f"{div}_common.yaml",
        f"{div}_{plan.benchmark}.yaml",
    ]


def show_dry_run(resolved, results_dir: Path, as_json: bool, apply_tuning: bool) -> None:
    from harness.core.tree import result_dir
    from harness.resolve import registry
    from harness.run import launch

    plan = resolved.plans[0]
    launcher = launch.get(resolved.launcher, apply_tuning=apply_tuning)
    spec = registry.spec(plan.benchmark)
    command = launcher.describe(resolved.plans, resolved.system, spec.module)
    out_dir = result_dir(results_dir, plan.submission.org, plan.submission.system, plan.benchmark)
    if as_json:
        doc = {
            "schema_version": 1,
            "plan": plan.model_dump(),
            "seeds": [p.seed for p in resolved.plans],
            "sources": resolved.sources,
            "notes": resolved.notes,
            "launcher": resolved.launcher,
            "launch": command,
            "rules": rules_files(plan),
            "results": str(out_dir),
            "node_tuning": resolved.system.launcher.node_tuning,
        }
        print(json.dumps(doc, indent=2))
        return
    from rich.table import Table

    from harness.commands.ui import out as _out

    out = _out()
    for note in resolved.notes:
        out.print(f"note: {note}")
    t = Table(title=f"{plan.benchmark} ({plan.size}) on {resolved.system.name}: resolved config")
    t.add_column("key")
    t.add_column("value")
    t.add_column("from")
    for k, v in plan.config.items():
        t.add_row(k, str(v), plan.provenance.get(k, ""))
    out.print(t)
    out.print(
        "config sources (lowest first): defaults in "
        + spec.config.__module__.replace(".", "/")
        + ".py"
        + "".join(f" < {s}" for s in resolved.sources)
    )
    out.print(f"layout: {plan.layout.describe()}")
    out.print(
        f"division: {plan.submission.division}; ruleset {plan.ruleset}; targets {plan.target}; "
        f"{len(resolved.plans)} run(s), seeds {[p.seed for p in resolved.plans]}"
    )
    out.print("rules: " + " -> ".join(rules_files(plan)))
    tuning = resolved.system.launcher.node_tuning
    if tuning:
        state = "applied in the prologue" if apply_tuning else "NOT applied (pass --apply-tuning)"
        out.print(f"node tuning ({state}): " + "; ".join(tuning))
    out.print(f"launcher: {resolved.launcher}")
    out.print(command, markup=False, highlight=False)
    out.print(f"results: {out_dir}/result_<i>.txt; artifacts: {Path(plan.run_dir).parent}/")
