"""What the planner needs to know about a machine, from a shipped system or an official JSON.

`Hardware` is deliberately small: node shape, the accelerator's dense peaks per precision and
memory, and three bandwidths (inside the scale-up domain, between domains, to the host), plus the
software text of the system description (for harness.planner.stacks). `from_spec` reads a
`SystemSpec` (systems/*.yaml); `from_official_json` reads a published system-description JSON,
which names its accelerator only in words: `lookup` matches those words against
data/accelerators.yaml (see its header for the rules).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from harness.core.errors import ConfigError
from harness.core.schema import load_json
from harness.core.tree import system_count

DATA = Path(__file__).resolve().parent / "data"


def load_data(name: str):
    """A YAML file of data/ (libyaml's parser where PyYAML has it: `mlperf plan` reads several)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load((DATA / name).read_text(), Loader=loader)  # noqa: S506 - a safe loader


@dataclass(frozen=True)
class Hardware:
    name: str
    accelerator: str
    family: str
    """Efficiency family (hopper, ada, blackwell, gaudi, tpu, cpu, ...): data/efficiency.yaml `family`."""
    nodes: int
    per_node: int
    domain: int
    """Accelerators sharing the fast scale-up fabric (8 for DGX H100, 72 for GB200 NVL72)."""
    memory_gib: float
    peak_tflops: dict
    intra_gbs: float
    inter_gbs: float
    host_gbs: float
    kind: str = "gpu"
    """'cpu' for gloo-on-CPU systems (cpu-local): collectives pay a per-call latency."""
    software: dict = field(default_factory=dict)
    """framework / other_software_stack text of the system description (stack recognition)."""
    source: str = ""

    @property
    def world(self) -> int:
        return self.nodes * self.per_node

    def peak(self, precision: str) -> float:
        """Dense peak FLOP/s for a precision; fp8 falls back to bf16 where the chip has no FP8."""
        p = self.peak_tflops
        for key in (precision, "bf16", "fp16", "tf32", "fp32"):
            if p.get(key):
                return float(p[key]) * 1e12
        raise ConfigError(f"accelerator '{self.accelerator}' has no peak_tflops for {precision} or bf16")

    def has_fp8(self) -> bool:
        return bool(self.peak_tflops.get("fp8"))


@cache
def catalogue() -> tuple[dict, ...]:
    return tuple(load_data("accelerators.yaml"))


def normalize(model_name: str) -> list[str]:
    """Words of an accelerator name without vendor marks: 'Intel(R) Gaudi(R) 2 AI Accelerator' ->
    ['intel', 'gaudi2', 'ai', 'accelerator']; 'TPU-v5e' -> ['tpu', 'v5e']."""
    s = model_name.lower()
    s = re.sub(r"\((r|tm|c)\)|[®™©]", " ", s)
    s = re.sub(r"[^a-z0-9.]+", " ", s)
    s = re.sub(r"\b(gaudi|mi|hl)\s+(\d)", r"\1\2", s)  # 'gaudi 2' -> 'gaudi2', 'mi 300x' -> 'mi300x'
    s = re.sub(r"\b(\d+)\s+(gb|gib)\b", r"\1\2", s)  # '80 gb' -> '80gb'
    s = re.sub(r"\btpuv(\d)", r"tpu v\1", s)
    return s.split()


def _score(words: list[str], tokens: list[str]) -> tuple[int, int] | None:
    exact = 0
    for t in tokens:
        if t in words:
            exact += 1
        elif not any(w.startswith(t) for w in words):
            return None
    return len(tokens), exact


def lookup(model_name: str) -> dict | None:
    """The catalogue entry for an accelerator name: most tokens matched, then most exact words."""
    words = normalize(model_name)
    best, best_score = None, (0, 0)
    for entry in catalogue():
        for alt in entry["match"]:
            s = _score(words, [str(t) for t in alt])
            if s and s > best_score:
                best, best_score = entry, s
    return best


def _unknown(model_name: str, where: str) -> ConfigError:
    known = ", ".join(e["name"] for e in catalogue())
    return ConfigError(
        f"{where}unknown accelerator '{model_name}': the planner knows {known} "
        f"(add a row to {DATA / 'accelerators.yaml'})"
    )


def from_spec(spec) -> Hardware:
    """A shipped `SystemSpec`: its own numbers win; the catalogue adds family, host link, source."""
    acc = spec.accelerator
    entry = lookup(acc.model_name) or {}
    if not acc.peak_tflops and not entry:
        raise ConfigError(
            f"system '{spec.name}': accelerator '{acc.model_name}' has no peak_tflops and is "
            f"not in {DATA / 'accelerators.yaml'}; add peak_tflops to the descriptor"
        )
    d = spec.description
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
        kind=acc.kind,
        software={"framework": d.framework, "other_software_stack": d.other_software_stack, "shipped": True},
        source=f"systems/{spec.name}.yaml" + (f"; {entry['source']}" if entry else ""),
    )


def from_catalogue(model_name: str, nodes: int, per_node: int, name: str = "", where: str = "") -> Hardware:
    entry = lookup(model_name)
    if entry is None:
        raise _unknown(model_name, where)
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
        source=entry.get("source", ""),
    )


def _memory_gib(text: str) -> float | None:
    m = re.match(r"\s*([\d.]+)\s*(MiB|GiB|GB|TB|MB|G)?", text or "")
    if not m:
        return None
    try:
        value = float(m.group(1))
    except ValueError:
        return None
    unit = m.group(2) or "GB"
    scale = {
        "MiB": 1 / 1024,
        "MB": 1e6 / 2**30,
        "GiB": 1,
        "GB": 1e9 / 2**30,
        "G": 1e9 / 2**30,
        "TB": 1e12 / 2**30,
    }
    return value * scale[unit]


def read_json(path: Path) -> dict:
    return load_json(Path(path), "a system-description JSON object")


def _count(v):
    """The official JSON writes counts as strings ("8"); published rows carry ints. Nothing else
    (a list, a bool, "8.5", 400 digits) is a count."""
    n = v if type(v) is int else system_count(v)
    if n is not None:
        return n
    raise ValueError('must be a whole number, written as a string of digits ("8")')


Count = Annotated[int, BeforeValidator(_count), Field(ge=1, le=1_000_000)]


class OfficialDescription(BaseModel):
    """The fields of an official system-description JSON that the planner reads (the other ~30
    are free text it ignores), typed: a wrong type is one line naming the field."""

    model_config = ConfigDict(extra="allow")
    accelerator_model_name: Annotated[str, Field(min_length=1, max_length=200)]
    number_of_nodes: Count
    accelerators_per_node: Count
    accelerator_memory_capacity: str = ""
    # free text in the rules; published JSONs also write other_software_stack as an object or list
    framework: Any = ""
    other_software_stack: Any = ""


def from_description(d: dict, name: str, where: str = "") -> Hardware:
    """A Hardware from the fields of an official system-description JSON (already parsed)."""
    try:
        desc = OfficialDescription.model_validate(d)
    except ValidationError as err:
        e = err.errors()[0]
        field_ = ".".join(str(x) for x in e["loc"])
        what = "missing" if e["type"] == "missing" else e["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{where}field '{field_}': {what} (an official system-description JSON)") from None
    nodes, per_node = desc.number_of_nodes, desc.accelerators_per_node
    hw = from_catalogue(desc.accelerator_model_name, nodes, per_node, name=name, where=where)
    mem = _memory_gib(desc.accelerator_memory_capacity)
    software = {"framework": desc.framework, "other_software_stack": desc.other_software_stack}
    hw = replace(hw, software=software)
    if mem and mem > 1:
        hw = replace(hw, memory_gib=mem)
    return hw


def from_official_json(path: Path) -> Hardware:
    """An official MLPerf system-description JSON (as in <org>/systems/*.json of a results repo)."""
    path = Path(path)
    return from_description(read_json(path), path.stem, where=f"{path}: ")
