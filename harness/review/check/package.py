"""The package checker's log (per-folder counts, seeds, RCP, power) turned into findings with a
fix, and the RCP numbers behind a failure (used by tree.py)."""

from __future__ import annotations

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


def package_findings(
    records, warned, display_dir: str, unmirror, has_scaling: bool
) -> tuple[list[Finding], dict]:
    findings: list[Finding] = []
    info = {"rcp": None, "seed": None}
    rcp_record, subm_mean = None, None
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
                info["seed"] = "failed"
                for err in text.split(":", 1)[1].strip().splitlines():
                    if err.strip():
                        m = re.match(
                            r"(?:Result file|Error found when querying seeds from) (\S+?):? ", err.strip()
                        )
                        findings.append(
                            Finding(
                                m[1] if m else display_dir,
                                None,
                                "seed",
                                "error",
                                err.strip()[:400],
                                "log one integer `seed` per run, each run a different value",
                                detail=text,
                            )
                        )
                continue
            fix = next(
                (f for pat, f in _PKG_FIX if f and re.search(pat, text)), "see the package checker's message"
            )
            if text == "Seed checker failed":
                continue  # summarised by the lines above
            findings.append(
                Finding(display_dir, None, "package", "error", text.splitlines()[0][:400], fix, detail=text)
            )
        elif lvl == "WARNING":
            if "Run incomplete or did not converge" in text:
                fix = "a run did not end with run_stop status success; at most one such run is allowed"
            elif "accepting this under olympic scoring" in text:
                fix = "one failing log is tolerated; fix it anyway if you can"
            elif "do not conform to naming convention" in text or "Unknown files" in text:
                fix = "only result_<i>.txt, scaling.json, package_checker_params and power/ belong in a result folder"
                if has_scaling:
                    fix += " (the package checker also counts a committed scaling.json here: expected then)"
            elif "RCP test failed but allowed" in text or "Please be ready" in text:
                fix = "rcp-bypass is set: the result will be reviewed by the submission committee"
            elif "power result" in text or "power" in text.lower():
                fix = (
                    "a power submission needs power/result_<i>/node_*.txt for every run; delete power/ for a "
                )
                fix += "performance-only result"
            elif text.startswith("Skipping benchmark"):
                fix = "this folder is not a benchmark of this ruleset"
            else:
                fix = "see the package checker's message"
            findings.append(
                Finding(display_dir, None, "package", "warning", text.splitlines()[0][:400], fix, detail=text)
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
