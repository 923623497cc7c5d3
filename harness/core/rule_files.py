"""The installed mlperf-logging's compliance rule files, read as data: which keys a log of a
(ruleset, benchmark, division) must carry, the closed-division hyperparameters with their allowed
values or formula, and the quality window.

    rule_files.closed_hyperparameters("6.1.0", "llama2_70b_lora")
      -> [KeyRule(name='lora_rank', req='EXACTLY_ONE', checks=("v['value'] == 16",),
                  allowed=(16,), file='training_6.1.0/closed_llama2_70b_lora.yaml'), ...]

Nothing here restates a rule: every value is parsed from `compliance_checker/training_X.Y.Z/
{common,<division>_common,<division>_<benchmark>}.yaml`, the files the official checker runs (in
the order it chains them). A CHECK that is only equalities with literals (`v['value'] == 2e-5 or
v['value'] == 3e-5`, `v['value'] in [...]`) gives `allowed`; any other CHECK is a formula, shown
as written.
"""

from __future__ import annotations

import ast
import functools
import os
from dataclasses import dataclass

import yaml

from harness.core.rulesets import USAGE, _package_dir

# Keys of a benchmark's closed file that are not hyperparameters: the quality window and the
# evaluation/progress events the rules also list there.
NOT_HYPERPARAMETERS = frozenset({"eval_accuracy", "eval_samples", "train_samples", "init_checkpoint_step"})


@dataclass(frozen=True)
class KeyRule:
    name: str
    req: str | None
    """EXACTLY_ONE, AT_LEAST_ONE, AT_LEAST_ONE_OR(other) or None (checked only when present)."""
    checks: tuple[str, ...]
    """The CHECK expressions, as written (v = the log line's value and metadata)."""
    at_least_one: str | None
    """ATLEAST_ONE_CHECK: true on at least one occurrence (the quality window)."""
    allowed: tuple | None
    """The literal values a pure-equality CHECK allows; None when the CHECK is a formula or absent."""
    file: str
    """The rule file, relative to the package's compliance_checker folder."""

    def rule(self) -> str:
        """One line: what the checker demands of this key."""
        parts = [self.req or "optional"]
        if self.allowed is not None:
            many = len(self.allowed) > 1
            parts.append(("one of " if many else "== ") + ", ".join(repr(v) for v in self.allowed))
        else:
            parts += [c for c in self.checks]
        if self.at_least_one:
            parts.append(f"at least once: {self.at_least_one}")
        return "; ".join(parts)


def rel_path(ruleset: str, name: str) -> str:
    return f"{USAGE}_{ruleset}/{name}.yaml"


def path_of(rel: str) -> str:
    return os.path.join(_package_dir("compliance_checker"), rel)


@functools.cache
def entries(rel: str) -> tuple[dict, ...]:
    """The records of one rule file (BEGIN and KEY), in order; () when the file does not exist."""
    p = path_of(rel)
    if not os.path.isfile(p):
        return ()
    with open(p, encoding="utf-8") as f:
        data = yaml.safe_load(f) or []
    return tuple(data)


def _checks(raw) -> tuple[str, ...]:
    if raw is None:
        return ()
    return tuple(str(c).strip() for c in (raw if isinstance(raw, list) else [raw]))


def _is_value(node: ast.AST) -> bool:
    """`v['value']`."""
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "v"
        and isinstance(node.slice, ast.Constant)
        and node.slice.value == "value"
    )


def allowed_values(check: str) -> tuple | None:
    """Literal values of `v['value'] == A [or v['value'] == B ...]` or `v['value'] in [A, B]`."""
    try:
        node = ast.parse(check.strip(), mode="eval").body
    except SyntaxError:
        return None
    terms = node.values if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) else [node]
    out = []
    for t in terms:
        if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and _is_value(t.left)):
            return None
        try:
            lit = ast.literal_eval(t.comparators[0])
        except ValueError:
            return None
        if isinstance(t.ops[0], ast.Eq):
            out.append(lit)
        elif isinstance(t.ops[0], ast.In) and isinstance(lit, (list, tuple)):
            out.extend(lit)
        else:
            return None
    return tuple(out)


def key_rules(rel: str, records: list[dict] | tuple[dict, ...] | None = None) -> dict[str, KeyRule]:
    """{key: KeyRule} of one rule file (or of `records` standing for it); a key listed twice
    keeps its last record."""
    out: dict[str, KeyRule] = {}
    for e in entries(rel) if records is None else records:
        k = e.get("KEY") if isinstance(e, dict) else None
        if not isinstance(k, dict) or "NAME" not in k:
            continue
        checks = _checks(k.get("CHECK"))
        allowed = allowed_values(checks[0]) if len(checks) == 1 else None
        out[k["NAME"]] = KeyRule(
            name=k["NAME"],
            req=k.get("REQ"),
            checks=checks,
            at_least_one=(str(k["ATLEAST_ONE_CHECK"]).strip() if k.get("ATLEAST_ONE_CHECK") else None),
            allowed=allowed,
            file=rel,
        )
    return out


def chain(ruleset: str, benchmark: str, division: str = "closed") -> list[str]:
    """The files the official checker runs for a log, in order (common, division common, the
    benchmark's division file); the benchmark file is left out when the ruleset has none."""
    files = [rel_path(ruleset, "common"), rel_path(ruleset, f"{division}_common")]
    own = rel_path(ruleset, f"{division}_{benchmark}")
    return files + ([own] if entries(own) else [])


def log_keys(ruleset: str, benchmark: str, division: str = "closed") -> dict[str, KeyRule]:
    """Every key the checker knows for such a log, the most specific file's record winning."""
    out: dict[str, KeyRule] = {}
    for rel in chain(ruleset, benchmark, division):
        out.update(key_rules(rel))
    return out


def required_keys(ruleset: str, benchmark: str, division: str = "closed") -> list[str]:
    """Keys the log must carry (REQ EXACTLY_ONE / AT_LEAST_ONE, not the either-or ones)."""
    return [
        k
        for k, r in log_keys(ruleset, benchmark, division).items()
        if r.req in ("EXACTLY_ONE", "AT_LEAST_ONE")
    ]


def closed_hyperparameters(ruleset: str, benchmark: str, records: list[dict] | None = None) -> list[KeyRule]:
    """The hyperparameters `<ruleset>/closed_<benchmark>.yaml` names (or `records` derived from
    it, e.g. the tiny rules), with its rule for each."""
    rules = key_rules(rel_path(ruleset, f"closed_{benchmark}"), records)
    return [r for k, r in rules.items() if k not in NOT_HYPERPARAMETERS and r.at_least_one is None]


def quality_window(ruleset: str, benchmark: str) -> str | None:
    """The closed file's ATLEAST_ONE_CHECK (on eval_accuracy, or SD's aggregated FID/CLIP key):
    the quality target as the checker tests it."""
    rules = key_rules(rel_path(ruleset, f"closed_{benchmark}")).values()
    return next((r.at_least_one for r in rules if r.at_least_one), None)
