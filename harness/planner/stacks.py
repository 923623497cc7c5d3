"""Which software stack a system ran, and which fitted efficiency factor applies to it.

    recognise(hw)               -> Stack from the system description's software text
    parse("nvidia-ngc@24.04")   -> Stack named by the user (`mlperf plan --stack`)
    for_plan(hw, spec)          -> the one `mlperf plan` prices, saying what the machine's other
                                   form (its YAML / its exported JSON) is priced as
    factor(stack, bench, k)     -> (efficiency factor, the key it came from, note or None)

The rules and the stacks are data (data/stacks.yaml, see its header); the factors are fitted
(data/efficiency.yaml `stack_eff`). A stack/version without a fitted factor for a benchmark falls
back to the nearest version of the same stack, then to the stack's `fallback`, and the note says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from dataclasses import replace as _replace
from functools import cache

from harness.core.errors import ConfigError, suggest
from harness.planner.hardware import load_data


@cache
def table() -> dict:
    return load_data("stacks.yaml")


def definitions() -> dict[str, dict]:
    return {s["name"]: s for s in table()["stacks"]}


@dataclass(frozen=True)
class Stack:
    name: str
    version: str | None = None
    how: str = ""
    """How it was recognised (for the plan's output)."""
    features: dict = field(default_factory=dict, compare=False)

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}" if self.version else self.name

    def uses_fp8(self) -> bool:
        since = self.features.get("fp8_since")
        if since is None:
            return False
        return self.version is None or _order(self.version) >= _order(str(since))

    @property
    def layouts(self) -> tuple[str, ...] | None:
        v = self.features.get("layouts")
        return None if v is None else tuple(v)


def _order(version: str) -> float:
    """A number that orders versions of one scheme: YY.MM -> months, MAJOR.MINOR -> 100 x major + minor."""
    a, _, b = version.partition(".")
    try:
        x, y = int(a), int(b or 0)
    except ValueError:
        return 0.0
    return x * 12 + y if x >= 20 else x * 100 + y


def _text(value) -> str:
    if isinstance(value, dict):
        return " ".join(f"{k} {_text(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return " ".join(_text(v) for v in value)
    return str(value or "")


def _words(text: str) -> str:
    return " " + re.sub(r"[^a-z0-9.]+", " ", text.lower().replace("_", " ")) + " "


def _cuda(software) -> str | None:
    """The newest CUDA major.minor named (a JSON may list several: '12.2.1.020; 12.4.1.003')."""
    items = software if isinstance(software, list) else [software]
    texts = []
    for it in items:
        if isinstance(it, dict):
            texts += [
                str(v) for key, v in it.items() if "cuda" in key.lower() and "driver" not in key.lower()
            ]
        else:
            texts += re.findall(r"cuda\W{0,4}([\d.; ]+)", str(it or "").lower())
    found = [(int(a), int(b)) for t in texts for a, b in re.findall(r"(?<![\d.])(\d{2})\.(\d+)", t)]
    return f"{max(found)[0]}.{max(found)[1]}" if found else None


def _version(scheme: str, framework: str, software) -> tuple[str | None, str]:
    if scheme == "ngc":
        texts = sorted(
            {f"{a}.{b}" for a, b in re.findall(r"(?<![\d.])(2\d)\.(0[1-9]|1[0-2])(?![\d])", framework)},
            key=_order,
        )
        cuda = _cuda(software) or _cuda(framework)
        from_cuda = table()["cuda_to_ngc"].get(cuda) if cuda else None
        if from_cuda:
            same = [v for v in texts if _near(v, from_cuda)]
            if same:
                return same[-1], f"release {same[-1]} (CUDA {cuda})"
            note = f" (the framework text says {', '.join(texts)})" if texts else ""
            return from_cuda, f"release {from_cuda} from CUDA {cuda}{note}"
        if texts:
            return texts[-1], f"release {texts[-1]}"
        return None, "no release named"
    if scheme == "date":
        m = re.findall(r"(20\d\d)(0[1-9]|1[0-2])\d\d", _text(software) + " " + framework)
        if m:
            y, mo = max(m)
            return f"{y[2:]}.{mo}", f"build date {y}-{mo}"
        return None, "no build date"
    if scheme == "release":
        m = re.search(
            r"(?:synapse\s*ai|synapse|software)\W*(\d+)\.(\d+)", (_text(software) + " " + framework).lower()
        )
        if m:
            return f"{m.group(1)}.{int(m.group(2))}", f"release {m.group(1)}.{int(m.group(2))}"
        return None, "no release named"
    return None, ""


def _near(text_version: str, cuda_version: str) -> bool:
    """Releases within 4 months of the one that shipped this CUDA minor carry the same CUDA."""
    return abs(_order(text_version) - _order(cuda_version)) <= 4


def make(name: str, version: str | None = None, how: str = "") -> Stack:
    defs = definitions()
    return Stack(name, version, how, dict(defs[name].get("features") or {}))


def recognise(hw) -> Stack:
    """The stack of a system from its description text; see data/stacks.yaml for the rules."""
    sw = hw.software or {}
    framework = _text(sw.get("framework"))
    software = sw.get("other_software_stack")
    text = _words(framework + " " + _text(software))
    defs = definitions()
    if sw.get("shipped"):
        return make("mlperf-harness", None, "a systems/ descriptor (YAML) runs this harness")
    # a detect word is split as the text is: 'mlperf-harness' raw never matched ' mlperf harness '
    name = next(
        (s["name"] for s in table()["stacks"] if any(_words(w) in text for w in s["detect"])),
        None,
    )
    how = f"framework '{framework.strip()[:60]}'" if name else ""
    generic = name in (None, "pytorch")
    if generic and hw.family in table()["by_family"]:
        name = table()["by_family"][hw.family]
        how = f"{hw.family} accelerators without a named framework"
    if name is None:
        return Stack("unknown", None, "no framework named and no default for this accelerator")
    version, vhow = _version(defs[name].get("versioning", "none"), framework, software)
    return make(name, version, "; ".join(x for x in (how, vhow) if x))


def parse(spec: str, recognised: Stack | None = None) -> Stack:
    """`NAME` or `NAME@VERSION` as given to --stack (`recognised`: what the system alone reads as)."""
    name, _, version = spec.strip().partition("@")
    defs = definitions()
    if name not in defs:
        raise ConfigError(
            f"--stack {spec}: unknown stack '{name}'{suggest(name, defs)}; known: {', '.join(defs)}"
        )
    how = "--stack"
    if recognised is not None and recognised.key != spec.strip():
        how += f"; without it {recognised.key}: {recognised.how}"
    return make(name, version or None, how)


def for_plan(hw, spec: str | None = None) -> Stack:
    """The stack `mlperf plan` prices `hw` as, its `how` naming the other form of the machine.

    A systems/ YAML is priced as this harness (mlperf-harness); its exported system JSON as what
    its framework text names (mlperf-harness where the text says so, else e.g. nvidia-ngc for
    'megatron'): the same machine then plans at different times, so the text says which stack
    the other form gets and the --stack that prices both alike."""
    own = recognise(hw)
    if spec:
        return parse(spec, own)
    sw = dict(hw.software or {})
    if sw.pop("shipped", None):
        as_json = recognise(_replace(hw, software=sw))
        if as_json.name == own.name:
            then = f"its exported system JSON names it too ({as_json.how}): priced the same"
        else:
            then = f"its exported system JSON is priced as {as_json.key} ({as_json.how}): --stack {as_json.key} to compare"
    elif own.name != "mlperf-harness":
        then = "a systems/ descriptor of this machine is priced as mlperf-harness: --stack mlperf-harness to compare"
    else:
        then = "as a systems/ descriptor of this machine"
    return make(own.name, own.version, f"{own.how}; {then}")


def factor(stack: Stack, bench: str, k: dict, table: str = "stack_eff") -> tuple[float, str, str | None]:
    """(factor, key it came from, note) for `bench` under `stack` from k[table] (`stack_eff`: compute
    efficiency, `stack_overhead`: per-step overheads), falling back as the module doc says."""
    table_ = k.get(table) or {}
    seen, current, hops = set(), stack, []
    while current is not None and current.name not in seen:
        seen.add(current.name)
        versions = [key for key in table_ if key.split("@")[0] == current.name and bench in table_[key]]
        if versions:
            best = min(versions, key=lambda key: _distance(key, current.version))
            note = None
            if best != current.key or hops:
                via = " via " + " -> ".join(hops + [current.name]) if hops else ""
                note = f"no fitted {bench} constants for stack {stack.key}; using {best}{via}"
            return float(table_[best][bench]), best, note
        hops.append(current.name)
        fb = definitions().get(current.name, {}).get("fallback")
        current = make(fb, None) if fb else None
    return 1.0, "reference", f"no fitted {bench} constants for stack {stack.key} or its fallbacks; factor 1"


def _distance(key: str, version: str | None) -> tuple[float, float]:
    """Nearest version first; without a version the newest one."""
    v = key.partition("@")[2]
    if not v:  # a key fitted on rows that named no release: exact for such a stack, else the last resort
        return (-1.0, 0.0) if version is None else (float("inf"), 0.0)
    if version is None:
        return (0.0, -_order(v))
    return (abs(_order(v) - _order(version)), -_order(v))
