"""Logs older than the ruleset they were checked under, said once.

A log that names no ruleset (published logs, foreign logs) is checked under the newest ruleset
listing its benchmark, as `mlperf run` takes it (core/rulesets.py). Rules grow: 6.1.0 added nine
keys (tensor_parallelism, lowest_numerical_precision_in_linear, ...), so a v5.1 log outside a
round-named folder fails with nine errors per log, ninety for a result folder, none of them the
cause. When logs whose ruleset was chosen by default all miss the same keys, and an older ruleset
of their benchmark does not require them, those errors become one finding: "these look like
<= X logs", with how to pin the round. The logs still fail (they do lack what the ruleset asks);
the official checker, run again on one of them, decides X, so nothing of the rules is re-encoded.
"""

from __future__ import annotations

import os
import re

from harness.core import rulesets as rules
from harness.review.check.messages import Finding

_MISSING = re.compile(r"required EXACTLY_ONE '([^']+)', found 0")
_CHOSEN = (rules.DEFAULT, "guessed")  # `ruleset_source` of a ruleset nobody pinned


def _key_missing(f: Finding) -> str | None:
    """The key a compliance finding says the log lacks, or None."""
    m = _MISSING.match(f.message) if f.tool == "compliance" else None
    return m[1] if m else None


def _missing(findings: list[Finding]) -> frozenset[str]:
    return frozenset(k for f in findings if (k := _key_missing(f)))


def _looks_like(path: str, ruleset: str, benchmark: str, keys: frozenset[str]) -> str | None:
    """The newest ruleset before `ruleset` listing `benchmark` under which the log lacks none of
    `keys` (None: every older one requires some of them too)."""
    from harness.review.check.log import check_log

    has = rules.rulesets_of(benchmark)  # oldest first
    for cand in reversed(has[: has.index(ruleset)] if ruleset in has else []):
        if not keys & _missing(check_log(path, cand).findings):
            return cand
    return None


def collapse(logs: list, base_path: str) -> list[Finding]:
    """Drop the shared missing-key errors of default-ruleset logs that look older and return one
    finding per (ruleset, keys) group saying so. `logs` are LogResults (edited in place)."""
    groups: dict[tuple[str, str, frozenset[str]], list] = {}
    for r in logs:
        source = r.ruleset_source or ""
        if r.tiny or not isinstance(r.benchmark, str) or not source.startswith(_CHOSEN):
            continue
        keys = _missing(r.findings)
        if keys:
            groups.setdefault((r.ruleset, r.benchmark, keys), []).append(r)
    out = []
    for (ruleset, benchmark, keys), group in groups.items():
        real = group[0].path if os.path.isabs(group[0].path) else os.path.join(base_path, group[0].path)
        older = _looks_like(real, ruleset, benchmark, keys)
        if older is None:
            continue
        for r in group:
            r.findings = [f for f in r.findings if _key_missing(f) not in keys]
        where = os.path.commonpath([r.path for r in group]) if len(group) > 1 else group[0].path
        major, minor = older.split(".")[:2]
        out.append(
            Finding(
                where,
                None,
                "harness",
                "error",
                f"{len(group)} {benchmark} log(s) look like <= {older} logs: each lacks the {len(keys)} keys "
                f"{ruleset} requires ({', '.join(sorted(keys))}); checked under {ruleset} ({group[0].ruleset_source})",
                f"pin their round with --round: v{major}.{minor} or earlier (their keys cannot tell which), "
                f"e.g. --round v{major}.{minor}; runs for {ruleset} must log these keys",
            )
        )
    return out
