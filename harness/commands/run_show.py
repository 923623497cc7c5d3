"""`mlperf run --dry-run`: the resolved config with provenance, the layout, rules and launch."""

from __future__ import annotations

import json
from pathlib import Path


def rules_files(plan) -> list[str]:
    """The rule files the official checker runs for this plan's logs, in chain order."""
    if plan.size == "tiny":
        from benchmarks.tiny_rules import config_path

        common = config_path(plan.ruleset)
        return [common, str(Path(common).parent / plan.submission_benchmark / "tiny_rules.yaml")]
    from harness.core.rule_files import chain

    return [
        f"mlperf_logging {f}"
        for f in chain(plan.ruleset, plan.submission_benchmark, plan.submission.division)
    ]


def closed_table(resolved) -> list[dict]:
    """The closed-division hyperparameters of the run's ruleset and size: the rule, the file it is
    in, and the value the log will carry: the config field of the log key's name, or the
    layout's gradient_accumulation_steps (rt.hyperparameters logs it from the layout)."""
    plan = resolved.plans[0]
    from_layout = {"gradient_accumulation_steps": plan.layout.grad_accum}
    return [
        {
            "key": k,
            "rule": rule,
            "allowed": None if allowed is None else list(allowed),
            "source": where,
            "value": from_layout[k] if k in from_layout else plan.config.get(k),
        }
        for k, (allowed, rule, where) in resolved.closed.items()
    ]


GIB = 2**30
PARTS = ("weights", "gradients", "optimizer")


def planner_figures(bench, plan) -> dict:
    """`mlperf plan`'s memory model for this plan's layout: the busiest rank's bytes by part and
    the parameter counts (the benchmark's cost model, the formulas behind the plan's memory)."""
    from harness.planner import params

    cfg = bench.typed(plan.config)
    return {
        "rank": params.rank_bytes(bench, cfg, plan.layout, plan.device),
        "parameters": params.parameters(bench, cfg),
    }


def _pct(got: float, ref: float) -> str:
    return f"{(got - ref) / ref:+.1%}" if ref else "n/a"


def build_lines(plan, report: dict, planned: dict) -> list[str]:
    """The build's figures as text: shards, the busiest rank against the planner, what was not built."""
    lay = plan.layout
    pt, pp = report["parameters_total"], planned["parameters"]["total"]
    lines = [
        f"build: {len(report['shards'])} distinct rank shard(s) of TP{lay.tp} PP{lay.pp} VP{lay.vp} "
        f"CP{lay.cp} DP{lay.dp}{f' EP{lay.ep}' if lay.ep > 1 else ''} ({lay.world_size} ranks) built on the meta "
        f"device ({plan.device} path; child wall {report['wall_s']} s, CPU {report['cpu_s']} s"
        + (f", {report['configs_in_child']} configs in it" if report.get("configs_in_child", 1) > 1 else "")
        + (f"; the same shards as {report['same_as']}'s config, built once" if report.get("same_as") else "")
        + ")",
        f"parameters: {pt:,} total, {report['parameters_trainable']:,} trainable "
        f"(planner {pp:,}, {_pct(pt, pp)})",
        f"{'shard':44s} {'ranks':>6s} {'parameters':>16s} {'weights GiB':>12s} {'grads GiB':>10s} {'optim GiB':>10s}",
    ]
    for sh in report["shards"]:
        lines.append(
            f"{sh['name']:44s} {sh['ranks']:6d} {sh['parameters']:16,d} "
            + " ".join(f"{sh[k] / GIB:{w}.3f}" for k, w in zip(PARTS, (12, 10, 10), strict=True))
        )
    busy = report["shards"][report["busiest"]]
    lines.append(
        "busiest shard vs mlperf plan's memory model: "
        + ", ".join(
            f"{k} {busy[k] / GIB:.3f} vs {planned['rank'][k] / GIB:.3f} GiB ({_pct(busy[k], planned['rank'][k])})"
            for k in PARTS
        )
    )
    lines += [f"not built: {n}" for n in report["not_built"]]
    lines += [f"built: {n}" for n in report["built"]]
    return lines


def show_dry_run(resolved, results_dir: Path, as_json: bool, apply_tuning: bool, build=None) -> None:
    from harness.core.tree import result_dir
    from harness.resolve.runplans import runnable
    from harness.run import launch
    from harness.run.launch import jobinfo

    plan = resolved.plans[0]
    launcher = launch.get(resolved.launcher, apply_tuning=apply_tuning)
    launch_notes = jobinfo.notes(resolved.plans, resolved.system, resolved.launcher)
    command = launcher.describe(resolved.plans, resolved.system, runnable(resolved.benchmark).module)
    out_dir = result_dir(results_dir, plan.submission.org, plan.submission.system, plan.submission_benchmark)
    from importlib.metadata import version

    ruleset = {
        "name": plan.ruleset,
        "why": plan.ruleset_source,
        "source": f"mlperf-logging {version('mlperf-logging')} compliance_checker/training_{plan.ruleset}",
        "submission_benchmark": plan.submission_benchmark,
    }
    if as_json:
        doc = {
            "schema_version": 1,
            "plan": plan.model_dump(),
            "seeds": [p.seed for p in resolved.plans],
            "sources": resolved.sources,
            "notes": resolved.notes,
            "launcher": resolved.launcher,
            "launch": command,
            "ruleset": ruleset,
            "rules": rules_files(plan),
            "closed_hyperparameters": closed_table(resolved),
            "disclosure": plan.disclosure,
            "results": str(out_dir),
            "node_tuning": resolved.system.launcher.node_tuning,
            "power": None if resolved.system.power is None else resolved.system.power.model_dump(),
            "launch_notes": launch_notes,
        }
        if build is not None:
            doc["build"] = dict(build, planner=planner_figures(resolved.benchmark, plan))
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
        + resolved.benchmark.config.__module__.replace(".", "/")
        + ".py"
        + "".join(f" < {s}" for s in resolved.sources)
    )
    out.print(f"layout: {plan.layout.describe()}")
    out.print(
        f"ruleset {plan.ruleset} ({plan.ruleset_source}; {ruleset['source']}), logged as "
        f"{plan.submission_benchmark}; division: {plan.submission.division}; targets {plan.target}; "
        f"{len(resolved.plans)} run(s), seeds {[p.seed for p in resolved.plans]}"
    )
    out.print("rules: " + " -> ".join(rules_files(plan)))
    out.print(
        "closed hyperparameters: "
        + "; ".join(f"{r['key']}: {r['rule']} ({r['source']})" for r in closed_table(resolved))
    )
    out.print("disclosed in the log: " + ", ".join(f"{k}={v}" for k, v in plan.disclosure.items()))
    tuning = resolved.system.launcher.node_tuning
    if tuning:
        state = "applied in the prologue" if apply_tuning else "NOT applied (pass --apply-tuning)"
        out.print(f"node tuning ({state}): " + "; ".join(tuning))
    power = resolved.system.power
    out.print(
        f"power: {power.describe()}; logs in power/result_<i>/ beside each result"
        if power is not None
        else "power: not measured (the system descriptor has no power: block)",
        markup=False,
        highlight=False,
    )
    out.print(f"launcher: {resolved.launcher}")
    for line in launch_notes:  # time limit arithmetic, cache drop, container image
        out.print(line, markup=False, highlight=False, soft_wrap=True)  # one line each
    # soft_wrap: the script is printed as it is written (rich would fold lines at 140 columns
    # when piped, and a folded script no longer runs).
    out.print(command, markup=False, highlight=False, soft_wrap=True)
    out.print(f"results: {out_dir}/result_<i>.txt; artifacts: {Path(plan.run_dir).parent}/")
    if build is not None:
        import click

        for line in build_lines(
            plan, build, planner_figures(resolved.benchmark, plan)
        ):  # unwrapped: one line each
            click.echo(line)
