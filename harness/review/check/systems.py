"""The official system-description checker on `<org>/systems/<system>.json`, its messages as
findings with a fix (used by tree.py)."""

from __future__ import annotations

import contextlib
import re

from harness.review.check.log import captured_official_output
from harness.review.check.messages import Finding
from harness.review.rules import USAGE

_STATUS_FIX = (
    "set \"status\" to one of 'Available on-premise', 'Available cloud', 'Research, Development, or "
    "Internal (RDI)', 'Preview' (v4.0 results were published with 'onprem'/'cloud', which rulesets >= 4.0.0 "
    "of the current checker reject)"
)


def check_system_json(path: str, ruleset: str, display: str) -> tuple[bool, list[Finding]]:
    from mlperf_logging.system_desc_checker import system_desc_checker

    findings: list[Finding] = []
    with captured_official_output() as (records, _out, _w):
        try:
            valid = system_desc_checker.check_system_desc(path, USAGE, ruleset)[0]
        except Exception as e:  # noqa: BLE001 - its crashes become findings
            valid = False
            fix = 'every value must be a string ("8", not 8); the file must be a JSON object'
            if isinstance(e, ValueError):
                fix = "the file is not valid JSON: repair it or re-create it with `mlperf systems export`"
            findings.append(
                Finding(
                    display,
                    None,
                    "system-desc",
                    "error",
                    f"the system-description checker crashed ({type(e).__name__}: {e})",
                    fix,
                )
            )
    for lvl, msg in records:
        if lvl != "ERROR":
            continue
        m = re.search(r"failed for (.*?) : (\[.*\])\s*$", msg, re.S)
        reasons = [msg]
        if m:
            with contextlib.suppress(ValueError, SyntaxError):
                import ast

                reasons = ast.literal_eval(m[2])
        for r in reasons:
            if "status contains a non valid value" in r:
                fix = _STATUS_FIX
            elif r.startswith("Missing field"):
                fix = f'add "{r.split()[-1]}" (a string, may be empty); `mlperf systems export` writes all 33 fields'
            else:
                fix = "correct the field as the message says"
            findings.append(Finding(display, None, "system-desc", "error", r, fix, detail=msg))
    return valid and not findings, findings
