"""The package checker's log (per-folder counts, seeds, RCP, power) turned into findings with a
fix, and the RCP numbers behind a failure (used by tree.py)."""

from __future__ import annotations

import os
import re

from harness.review.check.messages import Finding

_PKG_FIX = [
    (
        r"Incorrect number of files",
        "a result needs exactly the official number of result_<i>.txt files (`mlperf benchmarks "
        "list` gives each benchmark's): run `mlperf run` with the default --runs",
    ),
    (
        r"files do not comply, directory cannot be accepted",
        "fix the failing logs listed above, or the power logs (every result_<i> of a power submission needs "
        "power/result_<i>/node_*.txt); only one failing run is tolerated (as the dropped run of the olympic mean)",
    ),
    (r"Seed checker failed", "log an integer `seed` in every run, a different one per run"),
    (r"RCP Test Failed", None),
    (r"Expected at least", "add the missing runs"),
]
_RCP_FIX = {
    "Could not detect global_batch_size": "log global_batch_size with one value, the same in every run",
    "Insufficient convergence": "more than one run did not converge (run_stop status != success): rerun them",
    "Cannot find any RCPs": "this benchmark has no RCPs for this ruleset",
    "RCP found": "the runs converge faster than the reference allows: check hyperparameters, or ask for review "
    "with `rcp-bypass` in package_checker_params",
    "RCP Interpolation": "the runs converge faster than the interpolated reference allows: check hyperparameters, or "
    "ask for review with `rcp-bypass` in package_checker_params",
}


def _rcp_numbers(record: str | None, subm_mean: str | None) -> str:
    """' (submission mean X; RCP mean Y, lowest accepted Z)' from the RCP checker's INFO lines
    (the record is a dict repr with numpy floats: `'RCP Mean': np.float64(0.78)`)."""
    if not subm_mean:
        return ""

    def num(key):
        m = re.search(rf"'{key}': (?:np\.float64\()?([-0-9.eE+]+)", record or "")
        return float(m[1]) if m else None

    mean, lowest = num("RCP Mean"), num("Min Epochs")
    if mean is None or lowest is None:
        return f" (submission mean {subm_mean})"
    return f" (submission mean {subm_mean}; RCP mean {mean:.6g}, lowest accepted {lowest:.6g})"


def count_problem(result_dir: str, benchmark: str) -> tuple[str, str] | None:
    """(what is wrong with the result_<i>.txt files, the fix) against the package's count for the
    benchmark: the missing and the extra file names, a fix that fits (more runs for a benchmark
    the harness runs; remove or renumber the extra ones)."""
    import benchmarks
    from harness.core.rulesets import names_by_ruleset, runs_required

    want = runs_required(benchmark)
    if want is None:
        return None
    have = set()
    for name in os.listdir(result_dir):
        m = re.fullmatch(r"result_(\d+)\.txt", name)
        if m and os.path.isfile(os.path.join(result_dir, name)):  # a directory so named is no result
            have.add(int(m[1]))
    missing = [f"result_{i}.txt" for i in range(want) if i not in have]
    extra = [f"result_{i}.txt" for i in sorted(have) if i >= want]
    if not missing and not extra:
        return None
    said = f"{len(have)} result files, {benchmark} needs {want} (result_0 ... result_{want - 1})"
    said += f"; missing: {', '.join(missing)}" if missing else ""
    said += f"; beyond the count: {', '.join(extra)}" if extra else ""
    if missing and len(have) < want:
        runs = benchmarks.runs()
        ours = next(
            (b for b in runs if benchmark in names_by_ruleset(benchmarks.get(b).official).values()), None
        )
        fix = f"add the {len(missing)} missing run(s)" + (
            f" (`mlperf run {ours} --runs {len(missing)}` claims the lowest free result_<i>.txt)"
            if ours
            else ""
        )
    else:
        fix = f"{benchmark} takes exactly {want} runs: remove or renumber the extra result files to result_0 ... result_{want - 1}"
    return said, fix


_POWER_FIX = "a power submission needs power/result_<i>/node_*.txt for every run; delete power/ for a performance-only result"
_NO_POWER = re.compile(r"Package does not contain power result for (\S+): (result_\d+)")
_SEED_HEAD = re.compile(r"(?:Result file|Error found when querying seeds from) (\S+?):? ")
ALLOWED = ("scaling.json", "package_checker_params", "power")
"""Entries of a result folder besides result_<i>.txt that the rules allow."""


def odd_entries(result_dir: str) -> list[str]:
    """The entries of a result folder that are neither result_<i>.txt nor ALLOWED."""
    return sorted(
        n for n in os.listdir(result_dir) if not re.fullmatch(r"result_\d+\.txt", n) and n not in ALLOWED
    )


def package_findings(
    records,
    warned,
    display_dir: str,
    unmirror,
    has_scaling: bool,
    counted: tuple[str, str] | None = None,
    odd: list[str] | None = None,
) -> tuple[list[Finding], dict]:
    """`counted`: count_problem's (message, fix) for the folder, which replaces the package checker's
    bare "found 9, expected 10"; `odd`: odd_entries of the folder (None: not known). The package
    checker warns of "unknown files" for a committed scaling.json, which the rules allow: with no
    odd entry those warnings are dropped (nothing to act on), else the fix names the odd ones."""
    findings: list[Finding] = []
    info = {"rcp": None, "seed": None}
    rcp_record, subm_mean = None, None
    unknown_said: set[str] = set()  # folders whose "unknown files" warning is out (one each)
    no_power: dict[str, list[str]] = {}  # folder -> runs the package checker found no power log for
    for lvl, msg in records:
        text = unmirror(msg.strip())
        if lvl == "INFO":
            if text.startswith("RCP Record:"):
                rcp_record = text.split(":", 1)[1].strip()
            elif text.startswith("Submission mean epochs:"):
                subm_mean = text.split(":", 1)[1].strip()
            elif text.startswith("RCP Test Passed"):
                info["rcp"] = text.split(":", 1)[1].strip()
            elif text == "Running Seed Checker":
                info["seed"] = "ran"
            elif text == "Bypassing Seed Checker":
                info["seed"] = "bypassed"
            continue
        if lvl == "ERROR":
            if text.startswith("RCP Test Failed"):
                rcp_msg = text.split(":", 1)[1].strip()
                info["rcp"] = "FAILED: " + rcp_msg
                fix = _RCP_FIX.get(rcp_msg) or (
                    "submit the missing RCP or ask for review with `rcp-bypass`"
                    if "Missing RCP" in rcp_msg
                    else "see the RCP checker's message"
                )
                numbers = _rcp_numbers(rcp_record, subm_mean)
                findings.append(
                    Finding(display_dir, None, "rcp", "error", text + numbers, fix, detail=rcp_record or "")
                )
                continue
            if text.startswith("Seed checker failed and found the following errors"):
                # one finding per problem: a line naming a result file starts one, the lines after
                # it that name none are its fragments (a log the seed checker cannot parse gives
                # four lines); every line stays in `detail`
                info["seed"] = "failed"
                groups: list[list[str]] = []
                for err in (e.strip() for e in text.split(":", 1)[1].strip().splitlines()):
                    if not err:
                        continue
                    if _SEED_HEAD.match(err) or not groups:
                        groups.append([err])
                    else:
                        groups[-1].append(err)
                for g in groups:
                    m = _SEED_HEAD.match(g[0])
                    more = f" (+{len(g) - 1} more lines of the seed checker)" if len(g) > 1 else ""
                    findings.append(
                        Finding(
                            m[1] if m else display_dir,
                            None,
                            "seed",
                            "error",
                            g[0][:400] + more,
                            "log one integer `seed` per run, each run a different value (a log the "
                            "checker cannot read is reported above: fix that first)",
                            detail=text,
                        )
                    )
                continue
            fix = next(
                (f for pat, f in _PKG_FIX if f and re.search(pat, text)), "see the package checker's message"
            )
            if text == "Seed checker failed":
                continue  # summarised by the lines above
            if counted and text.startswith("Incorrect number of files"):
                findings.append(
                    Finding(display_dir, None, "package", "error", counted[0], counted[1], detail=text)
                )
                continue
            findings.append(
                Finding(display_dir, None, "package", "error", text.splitlines()[0][:400], fix, detail=text)
            )
        elif lvl == "WARNING":
            if "Run incomplete or did not converge" in text:
                fix = "a run did not end with run_stop status success; at most one such run is allowed"
            elif "accepting this under olympic scoring" in text:
                fix = "one failing log is tolerated; fix it anyway if you can"
            elif "do not conform to naming convention" in text or "Unknown files" in text:
                where = re.search(r"directory:? (\S+?),?(?: |$)", text)
                folder = where[1] if where else ""
                if (odd is not None and not odd) or folder in unknown_said:
                    continue  # only what the rules allow (scaling.json, ...), or said once already
                unknown_said.add(folder)
                fix = "only result_<i>.txt, scaling.json, package_checker_params and power/ belong in a result folder"
                fix += f"; here also: {', '.join(odd)}" if odd else ""
            elif "RCP test failed but allowed" in text or "Please be ready" in text:
                fix = "rcp-bypass is set: the result will be reviewed by the submission committee"
            elif m := _NO_POWER.match(text):
                no_power.setdefault(m[1], []).append(m[2])  # one finding per folder, after the loop
                continue
            elif "power result" in text or "power" in text.lower():
                fix = _POWER_FIX
            elif text.startswith("Skipping benchmark"):
                fix = "this folder is not a benchmark of this ruleset"
            else:
                fix = "see the package checker's message"
            findings.append(
                Finding(display_dir, None, "package", "warning", text.splitlines()[0][:400], fix, detail=text)
            )
    for where, runs in no_power.items():
        findings.append(
            Finding(
                display_dir,
                None,
                "package",
                "warning",
                f"no power logs for {len(runs)} run(s) of {where}: {', '.join(runs)}",
                _POWER_FIX,
            )
        )
    for w in warned:
        findings.append(
            Finding(
                display_dir,
                None,
                "seed",
                "warning",
                unmirror(str(w.message))[:400],
                "log the seed once per run (rank 0 only)",
            )
        )
    return findings, info
