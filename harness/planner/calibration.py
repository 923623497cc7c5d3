"""The constants the planner ships (data/efficiency.yaml), the published results they were fitted on
(data/published.yaml), and the constants that apply to one prediction.

    constants(overrides)            fixed + fitted constants as one flat dict
    for_prediction(w, hw, stack)    ... + the stack's factor for the benchmark, the harness's own
                                    constants (impl 'harness') and the user's calibration file;
                                    returns (k, notes)
    published()                     the rows the constants are fitted on (the 172 published
                                    MLPerf Training v3.0-v4.1 results of the four benchmarks)
(search.predict(row, k): minutes for one row, as `mlperf plan --system-json` would.)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from harness.planner import stacks as S
from harness.planner.hardware import Hardware, from_description, load_data

RECOMPUTE_ORDER = ("none", "selective", "full")


@cache
def efficiency_file() -> dict:
    return load_data("efficiency.yaml")


def _merge(base: dict, over: dict) -> dict:
    out = {key: (dict(v) if isinstance(v, dict) else v) for key, v in base.items()}
    for key, v in (over or {}).items():
        out[key] = {**out.get(key, {}), **v} if isinstance(v, dict) and isinstance(out.get(key), dict) else v
    return out


def constants(overrides: dict | None = None) -> dict:
    """Fixed and fitted constants as one flat dict (fitted entries may be nested per benchmark)."""
    d = efficiency_file()
    return _merge(_merge(d["fixed"], d["fitted"]), overrides or {})


def for_prediction(bench: str, hw: Hardware, stack: S.Stack, k: dict | None = None, user: dict | None = None):
    """(constants for this benchmark on this system and stack, notes). `user`: a calibration
    file's contents (harness.planner.selfcal) that replaces the harness's constants."""
    k = dict(k or constants())
    notes: list[str] = []
    if stack.name == "mlperf-harness":
        harness = efficiency_file().get("harness", {})
        group = "cpu" if hw.kind == "cpu" else "gpu"
        k = _merge(k, harness.get(group, {}))
        if user:
            k = _merge(k, user.get("constants", {}))
            notes.append(
                f"constants of stack mlperf-harness calibrated on this system's runs ({user['path']})"
            )
        else:
            notes.append(
                f"stack mlperf-harness: {group} constants as shipped (fitted on "
                f"{', '.join(efficiency_file().get('harness_fitted_on', {}).get(group, [])) or 'no runs'}); "
                f"`mlperf plan {bench} --system {hw.name} --calibrate RUN_DIR` fits them to this system"
            )
    factor, used, note = S.factor(stack, bench, k)
    overhead = S.factor(stack, bench, k, "stack_overhead")[0] if used != "reference" else 1.0
    if stack.name == "mlperf-harness" and (hw.kind == "cpu" or user):
        factor, used, note, overhead = 1.0, "mlperf-harness", None, 1.0  # its own constants
    k["stack_factor"] = factor
    k["stack_overhead_factor"] = overhead
    k["stack_used"] = used
    if note and stack.name != "mlperf-harness":
        notes.append(note)
    elif stack.name == "mlperf-harness" and used != "mlperf-harness":
        notes.append(f"stack mlperf-harness has no published results: compute efficiency of {used}")
    if hw.family not in k.get("family", {}) and hw.kind != "cpu":
        notes.append(
            f"no fitted results on '{hw.family}' accelerators: their efficiency per peak FLOP is "
            f"assumed equal to Hopper's"
        )
    unfitted = _unfitted(k, bench)
    if unfitted:
        notes.append(
            f"no published {bench} results fitted: its {', '.join(unfitted)} are the planner's "
            f"default priors (data/priors.yaml), not fitted: its predictions are unvalidated"
        )
    return k, notes


@cache
def _priors() -> dict:
    return load_data("priors.yaml")


def _unfitted(k: dict, bench: str) -> list[str]:
    """Fill, in place, the per-benchmark constants `bench` has no fitted value of with the
    default row of data/priors.yaml (the start every fit begins from); return their names. A
    benchmark new to the planner then gets the typical efficiency, said so, never 0 or another
    benchmark's."""
    d = _priors()
    out = []
    for key in d["per_benchmark"]:
        table = k.get(key)
        if isinstance(table, dict) and bench not in table:
            k[key] = {**table, bench: d["default"][key][0]}
            out.append(key)
    return out


@dataclass(frozen=True)
class Published:
    id: str
    round: str
    ruleset: str
    submitter: str
    system: str
    bench: str
    accelerator: str
    nodes: int
    per_node: int
    gbs: int
    score_min: float
    framework: str = ""
    software: object = ""
    memory: str = ""
    layout: tuple | None = None
    """(tp, pp, vp, cp, mbs) where the submitter's config is known (NVIDIA v4.0 notes)."""

    @property
    def world(self) -> int:
        return self.nodes * self.per_node

    @property
    def system_key(self) -> str:
        """The same system across rounds: submitter + system name."""
        return f"{self.submitter}/{self.system}"

    def hardware(self) -> Hardware:
        d = {
            "accelerator_model_name": self.accelerator,
            "number_of_nodes": self.nodes,
            "accelerators_per_node": self.per_node,
            "accelerator_memory_capacity": self.memory,
            "framework": self.framework,
            "other_software_stack": self.software,
        }
        return from_description(d, self.system, where=f"published row {self.id}: ")

    def stack(self) -> S.Stack:
        return S.recognise(self.hardware())


# The tables of published rows, one per import (bench/fit_planner.py --import-fixture [--next]):
# v3.0-v4.0, then v4.1. All are fitted on; harness/planner/forward.py still predicts each round
# from the rounds before it only.
TABLES = ("published.yaml", "published_v4.1.yaml")
NEXT_ROUND = TABLES[-1]


@cache
def published(name: str | None = None) -> tuple[Published, ...]:
    """The published rows the constants are fitted on (every table), or one table."""
    if name is None:
        return tuple(r for t in TABLES for r in published(t))
    rows = load_data(name)
    return tuple(Published(**{**r, "layout": tuple(r["layout"]) if r.get("layout") else None}) for r in rows)
