"""A benchmark across the rulesets of the installed mlperf-logging, and what changed between them
(`mlperf benchmarks show BENCH`). Everything is read from the package: the name per ruleset
(core/rulesets.py), the closed file's quality window, keys and hyperparameter rules
(core/rule_files.py), the RCP tables (rcp_checker/training_X/rcps_<name>.json) and the run count
(benchmark_meta)."""

from __future__ import annotations

from harness.core import rule_files, rulesets


def _rcps(ruleset: str, name: str) -> dict[int, float]:
    """{batch size: olympic mean to converge} of the ruleset's RCP file ({} when it has none)."""
    out = {}
    for rec in rulesets.rcp_records(ruleset, name).values():
        runs = sorted(rec.get("Epochs to converge") or rec.get("samples to converge") or [])
        kept = runs[1:-1] or runs
        if kept:
            out[int(rec["BS"])] = round(sum(kept) / len(kept), 6)
    return dict(sorted(out.items()))


def history(benchmark: str) -> list[dict]:
    """One entry per ruleset that lists the benchmark (under any of its names), oldest first."""
    out = []
    for rs, name in rulesets.names_by_ruleset(benchmark).items():
        closed = {r.name: r.rule() for r in rule_files.closed_hyperparameters(rs, name)}
        out.append(
            {
                "ruleset": rs,
                "name": name,
                "quality_window": rule_files.quality_window(rs, name),
                "required_keys": sorted(rule_files.required_keys(rs, name, "closed")),
                "closed_hyperparameters": closed,
                "rcps": _rcps(rs, name),
                "runs": rulesets.runs_required(name),
                "files": rule_files.chain(rs, name, "closed"),
            }
        )
    return out


def _keyed(old: dict, new: dict) -> list[str]:
    lines = [f"+ {k}: {new[k]}" for k in new if k not in old]
    lines += [f"- {k}" for k in old if k not in new]
    lines += [f"~ {k}: {old[k]} -> {new[k]}" for k in new if k in old and old[k] != new[k]]
    return lines


def changes(hist: list[dict]) -> list[dict]:
    """What differs from each ruleset to the next: name, quality window, required keys, closed
    hyperparameter rules, RCPs (batch sizes added/removed/moved), run count. Nothing changed: []."""
    out = []
    for a, b in zip(hist, hist[1:]):
        what: dict[str, list[str] | str] = {}
        if a["name"] != b["name"]:
            what["name"] = f"{a['name']} -> {b['name']}"
        if a["quality_window"] != b["quality_window"]:
            what["quality_window"] = f"{a['quality_window']} -> {b['quality_window']}"
        keys = [f"+ {k}" for k in b["required_keys"] if k not in a["required_keys"]]
        keys += [f"- {k}" for k in a["required_keys"] if k not in b["required_keys"]]
        if keys:
            what["required_keys"] = keys
        if hp := _keyed(a["closed_hyperparameters"], b["closed_hyperparameters"]):
            what["closed_hyperparameters"] = hp
        if a["rcps"] != b["rcps"]:
            what["rcps"] = [
                f"{len(a['rcps'])} -> {len(b['rcps'])} batch sizes "
                f"({min(b['rcps'], default='-')}..{max(b['rcps'], default='-')})",
                *_keyed(
                    {f"BS {k}": v for k, v in a["rcps"].items()}, {f"BS {k}": v for k, v in b["rcps"].items()}
                ),
            ]
        if a["runs"] != b["runs"]:
            what["runs"] = f"{a['runs']} -> {b['runs']}"
        out.append({"from": a["ruleset"], "to": b["ruleset"], "changes": what})
    return out
