"""Submission-tree checks for `mlperf check`: package, system-description, seed and RCP checkers.

A tree is any folder holding `<org>/results/<system>/<benchmark>/result_*.txt` (a benchmark result
folder, a system folder, a submitter folder or a whole round with many submitters).

How the official package checker is run (mlperf-logging 4.1.68, in-process):
- on a *mirror* per result folder in a temp dir (folders real, files symlinked, `scaling.json`
  copied), because its RCP step rewrites or deletes `scaling.json` in place, and because one
  crash (missing systems JSON, a log line it cannot parse) would otherwise abort every folder
  after it. The mirror holds `<org>/systems/<system>.json`, the system-level
  `package_checker_params` and `<org>/benchmarks` (for the seed checker);
- `package_checker.check_training_result_files` runs unchanged (file counts, per-file
  compliance with the one-failure olympic allowance, power logs, seed checker for closed,
  RCP checker with `set_scaling=True` for closed). Only its per-file compliance call
  (`mlp_compliance.main`) is routed through `harness.review.check.log.check_log`, which runs the same
  official checker but with the ruleset's tiny rules (benchmarks/tiny_rules.py) for our tiny logs
  (`harness_size: tiny`) and survives the logs that crash it. Our tiny results are `division: open`
  (cpu-local), so the seed and RCP checks do not apply to them, exactly as for any open result;
- the system-description checker runs on every `systems/<system>.json` in scope.
Pre-checks report what would crash or hang the official tools (missing or unreadable systems
JSON, MLLOG lines too long for its parser) and keep those parts out of the package checker;
their logs still get the compliance check.
A `scaling.json` that differs from what the RCP checker computes is reported (warning).
"""

from __future__ import annotations

import os
import shutil
import tempfile

from harness.core import rulesets as rules
from harness.core.files import is_special, open_input
from harness.core.mllog_reader import TOKEN
from harness.core.rulesets import USAGE
from harness.core.tree import find_result_dirs, load_system, mixed_folder, read_scaling
from harness.review.check.cross import cross_check
from harness.review.check.log import (
    LogResult,
    Report,
    captured_official_output,
    check_log,
    display_path,
    log_files,
)
from harness.review.check.messages import MAX_LINE, Finding
from harness.review.check.package import count_problem, odd_entries, package_findings
from harness.review.check.power import lint as power_lint
from harness.review.check.systems import check_system_json
from harness.review.pool import pmap


def _harness(path: str, severity: str, message: str, fix: str) -> Finding:
    """A finding the harness makes about a file of the tree (no line)."""
    return Finding(path, None, "harness", severity, message, fix)


def _crash(e: Exception, display_dir: str, power: list[Finding]) -> Finding:
    """The package checker's crash as one finding naming where it most likely stopped: the first
    power/ entry the power lint refuses (it crashes on a stray folder there), else the logs."""
    stray = next((f.file for f in power if f.severity == "error"), None)
    where = f" on {stray}" if stray else ""
    fix = (
        "fix the power/ problems of this folder (the power lint's findings below)"
        if stray
        else "a log line it needs (global_batch_size, run_stop, eval_accuracy) is malformed: fix the "
        "logs flagged above"
    )
    return Finding(
        display_dir,
        None,
        "package",
        "error",
        f"the package checker crashed{where} ({type(e).__name__}: {e})",
        fix,
    )


def find_orgs(path: str) -> dict[str, list[str]]:
    """{org folder: [result folders in scope]} for result folders laid out as
    <org>/results/<system>/<benchmark>/; empty when `path` is just a folder of logs."""
    groups: dict[str, list[str]] = {}
    for d in find_result_dirs(path):
        results = os.path.dirname(os.path.dirname(d))
        if os.path.basename(results) == "results":
            groups.setdefault(os.path.dirname(results), []).append(d)
    return groups


def _has_long_line(path: str) -> int | None:
    try:
        with open_input(path, encoding="latin-1") as f:
            for n, line in enumerate(f, 1):
                if len(line) > MAX_LINE and TOKEN in line:
                    return n
    except OSError:
        return None
    return None


def _load_system(org: str, system: str) -> tuple[dict | None, str | None]:
    desc, problem = load_system(org, system)
    if desc is not None and "division" not in desc:
        return None, f"systems/{system}.json has no 'division' field"
    return desc, problem


# ------------------------------------------------------------------------------------------
# the package checker on one result folder


def _mirror(tmp: str, org: str, result_dir: str, exclude: set[str]) -> tuple[str, str, dict]:
    """Build <tmp>/<org>/... for one result folder; returns (mirror org, mirror dir, {mirror file: real})."""
    # Absolute targets: a relative symlink would resolve against the mirror, not the caller's cwd.
    org, result_dir = os.path.abspath(org), os.path.abspath(result_dir)
    system = os.path.basename(os.path.dirname(result_dir))
    bench = os.path.basename(result_dir)
    morg = os.path.join(tmp, os.path.basename(org) or "org")
    os.makedirs(os.path.join(morg, "systems"), exist_ok=True)
    os.symlink(
        os.path.join(org, "systems", system + ".json"), os.path.join(morg, "systems", system + ".json")
    )
    if os.path.isdir(os.path.join(org, "benchmarks")):
        os.symlink(os.path.join(org, "benchmarks"), os.path.join(morg, "benchmarks"))
    msys = os.path.join(morg, "results", system)
    mdir = os.path.join(msys, bench)
    os.makedirs(mdir)
    params = os.path.join(os.path.dirname(result_dir), "package_checker_params")
    if os.path.isfile(params):
        shutil.copyfile(params, os.path.join(msys, "package_checker_params"))
    mapping = {}
    for name in sorted(os.listdir(result_dir)):
        src, dst = os.path.join(result_dir, name), os.path.join(mdir, name)
        if name in exclude:
            continue
        if name == "scaling.json":
            # the RCP step writes scaling.json: a copy, never a link, or it would write through
            # the link into (or beyond) the tree it only reads (a linked or non-file one is in
            # `exclude`: check_result_dir)
            shutil.copyfile(src, dst)
        else:
            os.symlink(src, dst)
            mapping[dst] = src
    return morg, mdir, mapping


def folder_ruleset(
    result_dir: str, ruleset: str | None, round_name: str | None
) -> tuple[str, str, str | None]:
    """(ruleset, how, problem) for a result folder: rules.for_folder on its folder name."""
    name = rules.benchmark_alias(os.path.basename(result_dir))
    if name in rules.all_benchmarks():
        return rules.for_folder(name, result_dir, ruleset, round_name)
    rs, how = rules.resolve(ruleset, round_name=round_name, path=result_dir)
    return rs, how, f"'{name}' is not a benchmark of any training ruleset of mlperf-logging"


def check_result_dir(
    org: str,
    result_dir: str,
    ruleset: str | None,
    base: str,
    round_name: str | None = None,
    power_gaps: str = "warning",
    tree_guess: str | None = None,
) -> tuple[list[LogResult], list[Finding], dict]:
    """The package checker (with its seed and RCP steps) on one result folder, under the
    folder's ruleset (given, or inferred: folder_ruleset), and the power lint on its `power/`
    (power.py; gaps over 1 s reported at severity `power_gaps`)."""
    from mlperf_logging.compliance_checker import mlp_compliance
    from mlperf_logging.package_checker import package_checker

    # Absolute paths throughout: logs are keyed by the real file the package checker reached
    # (so none is checked twice), and the package checker may change the working directory.
    org, result_dir, base = os.path.abspath(org), os.path.abspath(result_dir), os.path.abspath(base)

    system = os.path.basename(os.path.dirname(result_dir))
    display_dir = display_path(result_dir, base)
    ruleset, how, note = folder_ruleset(result_dir, ruleset, round_name)
    how = "guessed for the whole tree" if tree_guess else how
    tool = {
        "tool": "package checker",
        "target": display_dir,
        "benchmark": os.path.basename(result_dir),
        "passed": None,
        "ruleset": ruleset,
        "ruleset_source": how,
    }
    findings: list[Finding] = []
    if note:
        findings.append(Finding(display_dir, None, "harness", "warning", note, "pass --ruleset to choose"))
    for mixed in mixed_folder(result_dir):  # one submission folder: one round's runs, one size
        findings.append(
            Finding(
                display_dir,
                None,
                "harness",
                "error",
                f"{mixed}; one submission folder holds one round's runs at one size; checked under {ruleset}",
                "move the other logs to a tree of their own, renumbered from result_0.txt",
            )
        )
    logs: dict[str, LogResult] = {}
    files = [f for f in log_files(result_dir) if os.path.dirname(f) == result_dir]

    desc, problem = _load_system(org, system)
    power = power_lint(result_dir, base, power_gaps)
    params = os.path.join(os.path.dirname(result_dir), "package_checker_params")
    if os.path.lexists(params) and not os.path.isfile(params):  # the mirror leaves it out
        findings.append(
            _harness(
                display_path(params, base),
                "error",
                "not a regular file (a FIFO, socket, device or folder): not given to the package checker",
                "commit package_checker_params as a regular file, or delete it",
            )
        )
    exclude = set()
    for name in sorted(os.listdir(result_dir)):
        entry = os.path.join(result_dir, name)
        if is_special(entry):  # a FIFO would block the official tools forever
            what = "not a regular file (a FIFO, socket or device)"
        elif name == "scaling.json" and (os.path.islink(entry) or not os.path.isfile(entry)):
            exclude.add(name)
            findings.append(
                _harness(
                    display_path(entry, base),
                    "warning",
                    "scaling.json is a link or not a file: not given to the RCP checker, which "
                    "computes its own (the tree is not written to)",
                    "commit scaling.json as a regular file (the RCP checker's output)",
                )
            )
            continue
        elif name.startswith("result_") and not os.path.isfile(entry):  # e.g. a directory
            # the package checker globs result_*.txt and drops what it cannot open, so one
            # result fewer would pass unnoticed
            what = "a result log that is not a file (a directory or a dangling link)"
        else:
            continue
        exclude.add(name)
        findings.append(
            _harness(
                display_path(entry, base),
                "error",
                f"{what}: not given to the package checker",
                "replace it with the log file",
            )
        )
    for f in files:
        n = _has_long_line(f)
        if n:
            exclude.add(os.path.basename(f))
            findings.append(
                Finding(
                    display_path(f, base),
                    n,
                    "harness",
                    "error",
                    "not given to the package checker: an MLLOG line is too long for its parser "
                    "(time quadratic in the line length)",
                    "remove the over-long line",
                )
            )
    # the runs' own claims (org, platform, configuration) next: a foreign run explains much of
    # what the package checker and the power lint then say
    findings += cross_check(org, result_dir, desc, display_dir)
    if problem:
        findings.append(
            Finding(
                display_dir,
                None,
                "package",
                "error",
                f"{problem}: the package checker would crash on this folder, so it was not run "
                "(its logs were compliance-checked)",
                "write the system description with `mlperf systems export <system> -o "
                f"<org>/systems/{system}.json`",
            )
        )
        tool["passed"] = False
    else:
        tmp = tempfile.mkdtemp(prefix="mlperf-check-")
        try:
            morg, mdir, mapping = _mirror(tmp, org, result_dir, exclude)

            def routed_main(filename, config_file, checker):  # the package checker's compliance call
                real = mapping.get(filename, filename)
                mark = len(records)
                res = check_log(real, ruleset, display=display_path(real, base), source=how)
                del records[mark:]  # its messages are in the LogResult, not the package checker's
                logs[real] = res
                return res.passed, None, None, None

            real_main = mlp_compliance.main
            with captured_official_output() as (records, _out, warned):
                mlp_compliance.main = routed_main
                try:
                    ok = package_checker.check_training_result_files(
                        morg, USAGE, ruleset, False, False, False, False, False
                    )
                except Exception as e:  # noqa: BLE001 - a crash is a finding, the other folders go on
                    ok = False
                    findings.append(_crash(e, display_dir, power))
                    findings += power  # the likelier cause, said right after (and not again)
                    power = []
                finally:
                    mlp_compliance.main = real_main

            def unmirror(text: str) -> str:
                return text.replace(mdir, display_dir).replace(morg, org)

            has_scaling = os.path.isfile(os.path.join(result_dir, "scaling.json"))
            counted = count_problem(result_dir, rules.benchmark_alias(os.path.basename(result_dir)))
            pkg_findings, info = package_findings(
                records, warned, display_dir, unmirror, has_scaling, counted, odd_entries(result_dir)
            )
            findings += pkg_findings
            tool.update(
                passed=bool(ok) and not any(f.severity == "error" for f in findings),
                rcp=info["rcp"],
                seed=info["seed"],
                division=desc.get("division"),
                # the package checker's own log (its per-file compliance output is in each log's findings)
                output="\n".join(f"{lvl} - {unmirror(m)}" for lvl, m in records)
                + "".join(f"\nWARNING - {unmirror(str(w.message))}" for w in warned),
            )
            # scaling.json: what the RCP checker computed vs what is committed
            if desc.get("division") == "closed":
                committed = os.path.isfile(os.path.join(result_dir, "scaling.json"))
                computed = os.path.isfile(os.path.join(mdir, "scaling.json"))
                c_factor = read_scaling(result_dir)[0] if committed else 1.0
                m_factor = read_scaling(mdir)[0] if computed else 1.0
                tool["scaling_factor"] = m_factor
                if committed != computed or abs(c_factor - m_factor) > 1e-12:
                    findings.append(
                        Finding(
                            os.path.join(display_dir, "scaling.json"),
                            None,
                            "rcp",
                            "warning",
                            f"the RCP checker computes scaling factor {m_factor!r}, the committed scaling.json says "
                            f"{c_factor if committed else 'nothing (no file)'}",
                            "commit the scaling.json the RCP checker writes (`mlperf results score` applies the "
                            "committed file)"
                            if computed
                            else "delete the committed scaling.json",
                        )
                    )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    # every log gets the compliance check, also those the package checker did not reach
    for f in files:
        if f not in logs:
            logs[f] = check_log(f, ruleset, display=display_path(f, base), source=how)
    findings += power
    if tool.get("passed"):  # the folder's row also answers for its power logs
        tool["passed"] = not any(f.severity == "error" for f in findings)
    tool["errors"] = sum(f.severity == "error" for f in findings)
    tool["warnings"] = sum(f.severity == "warning" for f in findings)
    return [logs[f] for f in files], findings, tool


def tree_ruleset(path: str, groups: dict[str, list[str]]) -> tuple[str | None, str | None]:
    """(ruleset, why) for a whole tree when neither --ruleset nor --round is given: the round of
    its path, else -- for a tree of published or foreign logs, which do not name their ruleset --
    the newest ruleset that lists every benchmark in it (one submission, one ruleset, as the
    official tools take it). (None, None) where the folders choose (our own runs' logs carry
    harness_ruleset; a round in a result folder's path below the root) or no ruleset lists them all."""
    from harness.core.tree import rulesets_in

    dirs = [d for ds in groups.values() for d in ds]
    if not dirs or rules.round_of_path(path)[0] or any(rules.round_of_path(d)[0] for d in dirs):
        return None, None
    if any(rulesets_in(d) for d in dirs):
        return None, None
    names = sorted({rules.benchmark_alias(os.path.basename(d)) for d in dirs})
    known = [n for n in names if n in rules.all_benchmarks()]
    fits = [r for r in rules.rulesets() if all(n in rules.benchmarks_of(r) for n in known)]
    if not known or not fits:
        return None, None
    rs = fits[-1]
    major, minor = rs.split(".")[:2]
    why = (
        f"ruleset {rs} for the whole tree, guessed: the newest that lists every benchmark in it "
        f"({', '.join(known)}); pin it with --round v{major}.{minor} or --ruleset"
    )
    return rs, why


def check_tree(
    path: str,
    groups: dict[str, list[str]],
    ruleset: str | None,
    round_name: str | None = None,
    power_gaps: str = "warning",
) -> Report:
    base = os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path))
    guessed = None
    if not ruleset and not round_name:
        ruleset, guessed = tree_ruleset(path, groups)
    rep = Report(path=path, ruleset=ruleset, kind="tree")
    if guessed:
        rep.head.append(_harness(path, "warning", guessed, "pass --round or --ruleset to choose"))
    jobs = []
    for org, dirs in sorted(groups.items()):
        systems: dict[str, str] = {}  # system -> the ruleset of its first result folder
        for d in sorted(dirs):
            systems.setdefault(
                os.path.basename(os.path.dirname(d)), folder_ruleset(d, ruleset, round_name)[0]
            )
        for system, rs in sorted(systems.items()):
            sj = os.path.join(org, "systems", system + ".json")
            if not os.path.isfile(sj):
                continue  # reported per result folder
            ok, fs = check_system_json(sj, rs, display_path(sj, base), load_system(org, system)[0])
            rep.findings += fs
            rep.tools.append(
                {
                    "tool": "system-desc checker",
                    "target": display_path(sj, base),
                    "passed": ok,
                    "errors": len(fs),
                    "warnings": 0,
                    "ruleset": rs,
                }
            )
        jobs += [(org, d, ruleset, base, round_name, power_gaps, guessed) for d in sorted(dirs)]
    # one result folder per worker process: the package checker is CPU-bound and patches module globals
    for logs, fs, tool in pmap(_check_result_dir, jobs, min_items=2):
        rep.logs += logs
        rep.findings += fs
        rep.tools.append(tool)
    return rep


def _check_result_dir(job: tuple):
    return check_result_dir(*job)
