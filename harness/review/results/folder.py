"""One result folder: which ruleset and benchmark it is (plan_folder), each log read and checked
(read_one, run in worker processes) and the row put together (assemble: system JSON, score,
energy, RCP). Helpers of score.py; nothing here raises for a tree's contents or writes to it."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field

from harness.core import rulesets as rules
from harness.core.files import is_special
from harness.core.tree import load_system, mixed_folder, read_scaling
from harness.review.check.log import tiny_rules_path
from harness.review.check.official import quiet_check
from harness.review.results import energy
from harness.review.results.olympic import score_runs
from harness.review.results.parse import median, read_run, run_from_loglines


@dataclass
class Plan:
    folder: str
    benchmark: str
    ruleset: str
    ruleset_source: str
    checkable: bool = True  # a benchmark the package knows: its rules exist
    problems: list = field(default_factory=list)


def plan_folder(folder: str, ruleset: str | None = None, round_name: str | None = None) -> Plan:
    name = rules.benchmark_alias(os.path.basename(folder))
    if name not in rules.all_benchmarks():
        files = glob.glob(os.path.join(glob.escape(folder), "result_*.txt"))
        logged = [b for b in (read_run(f).benchmark for f in files) if isinstance(b, str)]
        said = max(set(logged), key=logged.count) if logged else None
        if said not in rules.all_benchmarks():
            rs, how = rules.resolve(ruleset, round_name=round_name, path=folder)
            return Plan(
                folder,
                name,
                rs,
                how,
                checkable=False,
                problems=[
                    f"unknown benchmark folder '{name}' (no training ruleset of mlperf-logging has it): time scored "
                    "without the compliance check"
                ],
            )
        note = f"folder name '{name}' is not a benchmark; its logs say '{said}' (scored as that)"
        name = said
    else:
        note = None
    rs, how, problem = rules.for_folder(name, folder, ruleset, round_name)
    mixed = [
        f"{m}; one submission folder holds one round's runs at one size: all scored under {rs}"
        for m in mixed_folder(folder)
    ]
    return Plan(folder, name, rs, how, problems=[p for p in (note, problem) if p] + mixed)


def read_one(task: tuple) -> object:
    """(path, ruleset, check) -> Run; checked runs that fail the compliance check do not count."""
    path, ruleset, check = task
    if not check or is_special(path):  # a FIFO would block the checker
        return read_run(path)
    v = quiet_check(path, ruleset, tiny_rules_path)
    if v.loglines is None:
        run = read_run(path)
        if not run.problems:
            run.problems.append(f"{v.why}: not counted")
        return run
    run = run_from_loglines(path, v.loglines, v.failed)
    if not v.passed:
        run.problems.append(f"fails the {ruleset} compliance check: {v.why}")
    return run


def _int(v) -> int | None:
    try:
        return int(str(v).strip())
    except (TypeError, ValueError):
        return None


def _run_id(run) -> str | None:
    """'<run_start ms>-<run_stop ms>': two runs logged the same two instants to the millisecond
    are one run, published twice (a copied log, or one re-stamped for another system)."""
    try:
        return f"{float(run.run_start_ms):.0f}-{float(run.run_stop_ms):.0f}"
    except (TypeError, ValueError):
        return None


def _system_fields(org_dir: str | None, system: str, runs: list) -> tuple[dict, str | None]:
    desc, problem = load_system(org_dir, system)
    if desc is None:
        divisions = {r.division for r in runs if r.division}
        plat = next((r.platform for r in runs if r.platform), None)
        return {"division": divisions.pop() if len(divisions) == 1 else None, "system_name": plat}, problem
    nodes, per_node = _int(desc.get("number_of_nodes")), _int(desc.get("accelerators_per_node"))
    return {
        "division": desc.get("division"),
        "availability": desc.get("status"),
        "system_name": desc.get("system_name"),
        "accelerator": desc.get("accelerator_model_name"),
        "framework": desc.get("framework"),
        "nodes": nodes,
        "accelerators": nodes * per_node if nodes is not None and per_node is not None else None,
    }, None


def assemble(job: tuple) -> dict:
    """(plan, runs, checked, rcp, with_runs) -> the folder's row."""
    plan, runs, checked, want_rcp, with_runs = job
    folder = plan.folder
    system = os.path.basename(os.path.dirname(folder))
    results = os.path.dirname(os.path.dirname(folder))
    org_dir = os.path.dirname(results) if os.path.basename(results) == "results" else None
    row = {
        "submitter": os.path.basename(org_dir) if org_dir else None,
        "system": system,
        "benchmark": plan.benchmark,
        "ruleset": plan.ruleset,
        "ruleset_source": plan.ruleset_source,
        "checked": checked and plan.checkable,
        **dict.fromkeys(
            ("division", "availability", "system_name", "accelerator", "framework", "accelerators", "nodes")
        ),
        "tiny": any(r.tiny for r in runs),
        "runs": len(runs),
        "path": folder,
    }
    fields, sys_problem = _system_fields(org_dir, system, runs)
    row.update(fields)
    factor, scale_problem = read_scaling(folder)
    problems = list(plan.problems) + [p for p in (sys_problem, scale_problem) if p]
    if not runs:
        problems.append("no result_*.txt files")
    scored = score_runs(runs, plan.benchmark, factor, checked=row["checked"])
    row.update({k: v for k, v in scored.items() if k != "problems"})
    problems += scored["problems"]
    counted = [r for r, m in zip(runs, scored["run_minutes"]) if m is not None]
    rates = [r.progress_per_s for r in counted if r.progress_per_s]
    units = {r.progress[1] for r in counted if r.progress}
    row["progress_unit"] = units.pop() if len(units) == 1 else None
    row["progress_per_s"] = median(rates) if rates and row["progress_unit"] else None
    row["energy_j"], run_energy = None, {}
    if energy.has_power(folder):
        order = {p: i for i, p in enumerate(glob.glob(os.path.join(glob.escape(folder), "result_*.txt")))}
        glob_counted = sorted(counted, key=lambda r: order.get(r.path, len(order)))
        row["energy_j"], run_energy, e_problem = energy.folder_energy(
            folder,
            [(r.path, float(r.run_stop_ms) - float(r.run_start_ms)) for r in glob_counted],
            len(runs) - len(counted),
            rules.max_dropped(plan.benchmark),
            factor,
            plan.ruleset,
        )
        if e_problem:
            problems.append(e_problem)
    if want_rcp:
        from harness.review.results.rcp import rcp_check

        row.update(rcp_check(folder, plan.ruleset, factor, row["division"]))
    row["problems"] = problems
    # what makes this result the same as another folder's (compare.duplicates): its runs' times
    row["run_ids"] = sorted(i for i in map(_run_id, runs) if i)
    orgs = [r.org for r in runs if isinstance(r.org, str)]
    row["submission_org"] = max(set(orgs), key=orgs.count) if orgs else None
    if with_runs:
        row["run_details"] = [{**r.to_dict(), "energy_j": run_energy.get(r.path)} for r in runs]
    return row
