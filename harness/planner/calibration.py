"""The constants (data/efficiency.yaml) and the published results (data/published.yaml) the project
ships, and how one published result is predicted: the submitter's own layout on its own system,
with the least recomputation that fits (configs do not always say) and the gnn feature store where
the memory model puts it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import yaml

from harness.planner import memory as M
from harness.planner import timing as T
from harness.planner import workloads as W
from harness.planner.hardware import DATA, Hardware, from_catalogue

RECOMPUTE_ORDER = ("none", "selective", "full")


@cache
def efficiency_file() -> dict:
    return yaml.safe_load((DATA / "efficiency.yaml").read_text())


def constants(overrides: dict | None = None) -> dict:
    """Fixed and fitted constants as one flat dict (fitted entries may be nested per benchmark)."""
    d = efficiency_file()
    k = {**d["fixed"], **{key: (dict(v) if isinstance(v, dict) else v) for key, v in d["fitted"].items()}}
    if overrides:
        for key, v in overrides.items():
            if isinstance(v, dict):
                k[key] = {**k.get(key, {}), **v}
            else:
                k[key] = v
    return k


@dataclass(frozen=True)
class Published:
    id: str
    bench: str
    system: str
    accelerator: str
    nodes: int
    per_node: int
    score_min: float
    source: str
    tp: int = 1
    pp: int = 1
    vp: int = 1
    cp: int = 1
    mbs: int = 1
    gbs: int = 1
    cuda_graphs: bool = False
    tp_comm_overlap: bool = True
    round: str = "v4.0"
    submitter: str = "NVIDIA"

    @property
    def world(self) -> int:
        return self.nodes * self.per_node

    def hardware(self) -> Hardware:
        return from_catalogue(self.accelerator, self.nodes, self.per_node, name=self.system)


@cache
def published() -> tuple[Published, ...]:
    return tuple(Published(**row) for row in yaml.safe_load((DATA / "published.yaml").read_text()))


def candidate_for(row: Published, hw: Hardware, k: dict) -> tuple[M.Candidate, dict]:
    """The row's layout with the least recompute that fits; (candidate, memory GiB by part)."""
    w = W.get(row.bench)
    base = dict(
        tp=row.tp,
        pp=row.pp,
        vp=row.vp,
        cp=row.cp,
        mbs=row.mbs,
        gbs=row.gbs,
        tp_comm_overlap=row.tp_comm_overlap and hw.intra_gbs >= 100,
        fp8=hw.has_fp8(),
    )
    if row.bench == "gnn":
        base["feature_store"] = M.gnn_placement(hw, k)
    options = RECOMPUTE_ORDER if w.kind == "transformer" else ("none",)
    mem = {}
    for rc in options:
        c = M.Candidate(recompute=rc, **base)
        mem = M.estimate(w, c, hw, k)
        if sum(mem.values()) <= hw.memory_gib:
            return c, mem
    return c, mem


def predict(row: Published, k: dict) -> float:
    hw = row.hardware()
    c, _ = candidate_for(row, hw, k)
    return T.time_to_train(W.get(row.bench), c, hw, k)["predicted_min"]
