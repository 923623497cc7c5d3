"""The official system-description checker on `<org>/systems/<system>.json`, its messages as
findings with a fix (used by tree.py)."""

from __future__ import annotations

import contextlib
import re

from harness.core.rulesets import USAGE
from harness.core.tree import system_count
from harness.review.check.log import captured_official_output
from harness.review.check.messages import Finding

_STATUS_FIX = (
    "set \"status\" to one of 'Available on-premise', 'Available cloud', 'Research, Development, or "
    "Internal (RDI)', 'Preview' (v4.0 results were published with 'onprem'/'cloud', which rulesets >= 4.0.0 "
    "of the current checker reject)"
)


def check_system_json(path: str, ruleset: str, display: str, desc: dict | None) -> tuple[bool, list[Finding]]:
    """The official checker on `path`, plus the counts of `desc` (the same file, already read
    with core/tree.py load_system; None when it is not a JSON object, which the checker reports)."""
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
    findings += _count_findings(desc or {}, display)
    return valid and not findings, findings


# Counts the official checker takes as any string; a training system has at least one of each.
# (Which processor/accelerator, memory and the like stay free text, as the rules have them.)
POSITIVE_COUNTS = (
    "number_of_nodes",
    "accelerators_per_node",
    "host_processors_per_node",
    "host_processor_core_count",
)


def _count_findings(desc: dict, display: str) -> list[Finding]:
    """A count that is not a whole number >= 1 (`"-4"`, `"0"`, `"8.5"`, `"eight"`) is an error:
    the results table would show it and the scoring of a closed result divides by it."""
    out = []
    for key in POSITIVE_COUNTS:
        v = desc.get(key)
        if not isinstance(v, str) or not v.strip():
            continue  # missing or not a string: the official checker reports that
        n = system_count(v)
        if n is None or n < 1:
            out.append(
                Finding(
                    display,
                    None,
                    "system-desc",
                    "error",
                    f'"{key}" is "{v[:40]}": a count must be a whole number >= 1',
                    f'write it as a string of digits, e.g. "{key}": "8" (`mlperf systems export` '
                    "writes the descriptor's values)",
                )
            )
    return out
