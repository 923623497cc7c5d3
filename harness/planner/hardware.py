"""What the planner needs to know about a machine, from a shipped system or an official JSON.

`Hardware` is deliberately small: node shape, the accelerator's dense peaks and memory, and three
bandwidths (inside the NVLink domain, between domains, to the host). `from_spec` reads a
`harness.resolve.systems.SystemSpec`; `from_official_json` reads a published system-description JSON
(which names the accelerator only in words) and fills the numbers from `data/accelerators.yaml`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import yaml

from harness.core.errors import ConfigError

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Hardware:
    name: str
    accelerator: str
    family: str
    """Efficiency family (hopper, ada, blackwell, ...): selects a fitted factor in efficiency.yaml."""
    nodes: int
    per_node: int
    domain: int
    """Accelerators sharing the fast scale-up fabric (8 for DGX H100, 72 for GB200 NVL72)."""
    memory_gib: float
    peak_tflops: dict
    intra_gbs: float
    inter_gbs: float
    host_gbs: float

    @property
    def world(self) -> int:
        return self.nodes * self.per_node

    def peak(self, precision: str) -> float:
        """Dense peak FLOP/s for a precision; fp8 falls back to bf16 where the chip has no FP8."""
        p = self.peak_tflops
        for key in (precision, "bf16", "fp16", "fp32"):
            if p.get(key):
                return float(p[key]) * 1e12
        raise ConfigError(f"accelerator '{self.accelerator}' has no peak_tflops for {precision} or bf16")

    def has_fp8(self) -> bool:
        return bool(self.peak_tflops.get("fp8"))


@cache
def catalogue() -> tuple[dict, ...]:
    return tuple(yaml.safe_load((DATA / "accelerators.yaml").read_text()))


def lookup(model_name: str) -> dict | None:
    low = model_name.lower()
    for entry in catalogue():
        if all(m in low for m in entry["match"]):
            return entry
    return None


def from_spec(spec) -> Hardware:
    """A shipped `SystemSpec`: its own numbers win; the catalogue adds family and host link."""
    acc = spec.accelerator
    entry = lookup(acc.model_name) or {}
    if not acc.peak_tflops and not entry:
        raise ConfigError(
            f"system '{spec.name}': accelerator '{acc.model_name}' has no peak_tflops and is "
            f"not in {DATA / 'accelerators.yaml'}; add peak_tflops to the descriptor"
        )
    return Hardware(
        name=spec.name,
        accelerator=acc.model_name,
        family=entry.get("family", "cpu" if acc.kind == "cpu" else "unknown"),
        nodes=spec.nodes,
        per_node=spec.accelerators_per_node,
        domain=spec.domain_size,
        memory_gib=acc.memory_gib,
        peak_tflops=dict(acc.peak_tflops or entry.get("peak_tflops", {})),
        intra_gbs=spec.intra_node_bandwidth_gbs,
        inter_gbs=spec.inter_node_bandwidth_gbs,
        host_gbs=float(entry.get("host_gbs", 32)),
    )


def from_catalogue(model_name: str, nodes: int, per_node: int, name: str = "") -> Hardware:
    entry = lookup(model_name)
    if entry is None:
        known = ", ".join(e["name"] for e in catalogue())
        raise ConfigError(
            f"unknown accelerator '{model_name}': the planner knows {known} "
            f"(add it to {DATA / 'accelerators.yaml'})"
        )
    return Hardware(
        name=name or f"{nodes}x{per_node}x{entry['name']}",
        accelerator=entry["name"],
        family=entry["family"],
        nodes=nodes,
        per_node=per_node,
        domain=min(nodes * per_node, int(entry["domain"])) if entry.get("domain_spans_nodes") else per_node,
        memory_gib=float(entry["memory_gib"]),
        peak_tflops=dict(entry["peak_tflops"]),
        intra_gbs=float(entry["intra_gbs"]),
        inter_gbs=float(entry["inter_gbs"]),
        host_gbs=float(entry["host_gbs"]),
    )


def _memory_gib(text: str) -> float | None:
    m = re.match(r"\s*([\d.]+)\s*(MiB|GiB|GB|TB|MB)?", text or "")
    if not m:
        return None
    value, unit = float(m.group(1)), (m.group(2) or "GB")
    return value * {"MiB": 1 / 1024, "MB": 1e6 / 2**30, "GiB": 1, "GB": 1e9 / 2**30, "TB": 1e12 / 2**30}[unit]


def from_official_json(path: Path) -> Hardware:
    """An official MLPerf system-description JSON (as in <org>/systems/*.json of a results repo)."""
    path = Path(path)
    try:
        d = json.loads(path.read_text())
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    missing = [
        k for k in ("accelerator_model_name", "number_of_nodes", "accelerators_per_node") if not d.get(k)
    ]
    if missing:
        raise ConfigError(f"{path}: missing {', '.join(missing)} (an official system-description JSON)")
    try:
        nodes, per_node = int(d["number_of_nodes"]), int(d["accelerators_per_node"])
    except ValueError:
        raise ConfigError(f"{path}: number_of_nodes/accelerators_per_node must be integers") from None
    hw = from_catalogue(d["accelerator_model_name"], nodes, per_node, name=path.stem)
    mem = _memory_gib(str(d.get("accelerator_memory_capacity", "")))
    if mem:
        hw = replace(hw, memory_gib=mem)
    return hw
