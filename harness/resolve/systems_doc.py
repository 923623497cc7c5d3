"""docs/systems.md, rendered from the descriptor model (systems.py SystemSpec): a minimal example,
the search path, then every field with its type, unit, default and meaning (the field docstrings).
Generated, so the page cannot drift from the model: tests/unit/test_systems_doc.py compares them.
Regenerate with `mlperf systems doc -o docs/systems.md`.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

import annotated_types as at
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from harness.resolve import system_search
from harness.resolve.systems import SystemSpec

REGENERATE = "mlperf systems doc -o docs/systems.md"

MINIMAL = """\
# systems/my-node.yaml: one 8x H100 node (the required fields, a launcher, a shipped tuned config)
name: my-node                     # = the file name, and the results folder's system name
submitter: MyOrg
system_name: My 8x H100 node
platform: Custom H100 server
nodes: 1
accelerators_per_node: 8
accelerator: {model_name: NVIDIA H100-SXM5-80GB, memory_gib: 79.6, peak_tflops: {bf16: 989.4, fp8: 1978.9}}
intra_node_bandwidth_gbs: 450     # NVLink4: 900 GB/s both ways per GPU
inter_node_bandwidth_gbs: 50      # one 400 Gb/s NIC per GPU
launcher: {kind: torchrun}
tuned_config: dgx-h100x1          # run the shipped DGX H100 configs on this node
"""

# The unit of every numeric field (tests/unit/test_systems_doc.py fails a numeric field without
# one, so a new number cannot be documented without saying what it counts).
UNITS = {
    "nodes": "nodes",
    "accelerators_per_node": "accelerators (processes)",
    "scale_up_domain": "accelerators",
    "accelerator.memory_gib": "GiB",
    "accelerator.peak_tflops": "TFLOP/s, dense",
    "intra_node_bandwidth_gbs": "GB/s per accelerator, one direction",
    "inter_node_bandwidth_gbs": "GB/s per accelerator, one direction",
    "host.processors_per_node": "processors (sockets)",
    "host.core_count": "cores per processor",
    "threads_per_process": "threads",
    "launcher.time_limit_min": "minutes",
    "launcher.switches": "leaf switches",
    "power.source.port": "TCP port",
    "power.source.cipher_suite": "RMCP+ suite id",
    "power.source.timeout_s": "seconds",
    "power.interval_s": "seconds",
    "power.conversion_eff": "fraction",
    "power.interconnect[].max_w": "W",
    "power.interconnect[].share": "fraction",
}


def _args(a: Any) -> tuple:
    return typing.get_args(a)


def _is_union(a: Any) -> bool:
    return typing.get_origin(a) in (typing.Union, types.UnionType)


def type_name(a: Any) -> str:
    """An annotation in words: 'int', "'gpu' or 'cpu'", 'list of string', 'mapping (below)'."""
    origin = typing.get_origin(a)
    if origin is Literal:
        return " or ".join(repr(x) for x in _args(a))
    if _is_union(a):
        return " or ".join(type_name(x) for x in _args(a) if x is not type(None))
    if origin is list:
        return f"list of {type_name(_args(a)[0])}"
    if origin is dict:
        k, v = _args(a)
        return f"mapping of {type_name(k)} to {type_name(v)}"
    if isinstance(a, type) and issubclass(a, BaseModel):
        return "mapping"
    return {"str": "string", "float": "number", "int": "integer", "bool": "true/false"}.get(
        getattr(a, "__name__", ""), str(a)
    )


def _bounds(field: Any) -> str:
    words = {at.Ge: (">=", "ge"), at.Gt: (">", "gt"), at.Le: ("<=", "le"), at.Lt: ("<", "lt")}
    out = []
    for m in field.metadata:
        for cls, (sign, attr) in words.items():
            if isinstance(m, cls):
                out.append(f"{sign} {getattr(m, attr)}")
    return f" ({', '.join(out)})" if out else ""


def _default(field: Any) -> str:
    if field.is_required():
        return "**required**"
    d = field.default
    if d is PydanticUndefined or isinstance(d, BaseModel):
        return "(its fields' defaults)"
    if d is None:
        return "absent"
    return "`" + (repr(d) if isinstance(d, str) else str(d).replace("'", "")) + "`"


def _model(a: Any) -> type[BaseModel] | None:
    if isinstance(a, type) and issubclass(a, BaseModel):
        return a
    if _is_union(a) or typing.get_origin(a) is list:
        for x in _args(a):
            if _model(x) is not None:
                return _model(x)
    return None


def _meaning(field: Any) -> str:
    sub = _model(field.annotation)
    text = field.description or (sub.__doc__ if sub is not None else "") or ""
    return " ".join(text.split()).replace("|", "\\|")


def numeric(a: Any) -> bool:
    """Whether a value of this annotation can be a number (int, float, in a union or a mapping)."""
    if a in (int, float):
        return True
    return any(numeric(x) for x in _args(a) if typing.get_origin(a) is not Literal)


def fields(model: type[BaseModel] = SystemSpec, prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted path, FieldInfo) of every field, a nested model's fields after its own row; a list
    of models is written `name[].field`."""
    out = []
    for name, f in model.model_fields.items():
        key = prefix + (f.alias or name)
        out.append((key, f))
        sub = _model(f.annotation)
        if sub is not None:
            is_list = typing.get_origin(f.annotation) is list
            out += fields(sub, key + ("[]." if is_list else "."))
    return out


def markdown() -> str:
    rows = "\n".join(
        f"| `{key}` | {type_name(f.annotation)}{_bounds(f)} | {UNITS.get(key, '')} | {_default(f)} | {_meaning(f)} |"
        for key, f in fields()
    )
    return f"""# System descriptors

<!-- Generated from harness/resolve/systems.py by `{REGENERATE}`; edit the model, not this page. -->

A system descriptor is a YAML file that says what a machine is: its nodes, accelerators and their
peak throughput and memory, the bandwidths between them, how processes start (one process,
torchrun, Slurm), and the official MLPerf system-description text. `mlperf run` and `mlperf plan`
read it (`--system NAME` or `--system FILE`); `mlperf systems export NAME` writes the official JSON.

## A minimal descriptor

```yaml
{MINIMAL.rstrip()}
```

`mlperf systems validate systems/my-node.yaml` checks it and lists every problem at once, one
line each (field path and fix; exit 2). Then `mlperf run BENCH --system my-node --dry-run`.

## Where `--system NAME` looks

A name (not a path) is looked up in order, and the first file found is used:

1. `./systems/NAME.yaml` in the current directory (a submitter's own checkout);
2. `NAME.yaml` in each folder of `${system_search.ENV}` (colon-separated, in order);
3. the harness's own `systems/` (the shipped descriptors).

`mlperf systems list` shows every name with the file it comes from; a name in two places is taken
from the first, and `mlperf run --dry-run` says which file that was. A path (`--system my.yaml`)
is read as it is.

## Scale and tuned configs

- `tuned_config: <shipped system>` runs the per-benchmark configs tuned for that shipped system
  (`benchmarks/<bench>/configs/<name>.yaml`) where none is named after your descriptor; without
  one, full-size runs take the planner's best layout (`mlperf plan BENCH --system NAME`).
- `--nodes N` on `mlperf run` and `mlperf plan` runs the same descriptor at N nodes: its config
  and launcher still apply, the layout is derived again for N nodes (a layout that cannot be is
  one line, exit 2). Its runs are filed as system `NAME-nN` (a system JSON states one node
  count), which `--system NAME-nN` and `--resume` read back as NAME at N nodes.

## Fields

Units are SI as written (GB/s = 10^9 bytes/s, GiB = 2^30 bytes). Fields whose meaning starts
with "Official" are copied into the system-description JSON under that name.

| field | type | unit | default | meaning |
|---|---|---|---|---|
{rows}
"""
