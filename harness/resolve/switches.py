"""No silent switches: a switch the implementation would not honour here is refused with one line.

Each typed config declares its switches (`SWITCHES` in benchmarks/<name>/config.py, a
`benchmarks.base.Switch` each): the device kinds whose code path honours it, the switches it needs,
the layout degrees it needs. `check` runs once per resolved config (harness/resolve/runplans.py),
the same way for CPU and GPU systems, before anything is written or launched:

    mlperf run gnn --system dgx-h100x8 --set cuda_graphs=true --dry-run
    -> cuda_graphs=true: the gnn implementation has no such path (...); --set cuda_graphs=false

A switch whose code imports a library (`Switch.library`: Transformer Engine, torchao, triton) is
accepted by `check` on a GPU system, but `mlperf run` refuses it before launching or writing
anything where that library is not installed (`require_libraries`, called by harness/run/execute.py);
`--dry-run` only notes it (`missing_libraries`), so shipped configs still dry-run on a CPU box.
Found with importlib.util.find_spec: nothing is imported, resolve stays torch-free and fast.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

from benchmarks.benchmark import Benchmark
from harness.core.errors import ConfigError
from harness.core.layout import DEGREES


def _show(v: Any) -> str:
    """A value as `--set` spells it (YAML scalars: true/false, not True/False)."""
    return str(v).lower() if isinstance(v, bool) else str(v)


def check(bench: Benchmark, cfg, provenance: dict[str, str], system_name: str, kind: str, layout) -> None:
    """Raise ConfigError (exit 2) for the first switch set where its implementation ignores it.

    kind: the system's accelerator kind ('cpu' or 'gpu'); layout: the derived core.layout.Layout."""
    switches = type(cfg).SWITCHES
    for name, sw in switches.items():
        value = getattr(cfg, name)
        set_ = f"{name}={_show(value)}"
        src = provenance.get(name, "default")
        if value == sw.off:
            for degree, most in sw.off_max_degree:
                have = getattr(layout, degree)
                if have > most:
                    what = "ranks" if degree == "world_size" else degree.upper()
                    raise ConfigError(
                        f"{set_} ({src}) cannot run with {what} {have} (at most {most}: {sw.why}); "
                        f"leave {name} on or use {what} {most}"
                    )
            continue
        undo = f"--set {name}={_show(sw.off)}"
        if not sw.on:
            raise ConfigError(
                f"{set_} ({src}): the {bench.name} implementation has no such path ({sw.why}); {undo}"
            )
        if kind not in sw.on:
            need = " or ".join(k.upper() for k in sw.on)
            raise ConfigError(
                f"{set_} needs a {need} ({sw.why}), but system '{system_name}' has {kind.upper()} "
                f"accelerators ({src}); use a {need} system or {undo}"
            )
        for other in sw.needs:
            off = switches[other].off
            if getattr(cfg, other) == off:
                want = f"{other}=true" if isinstance(off, bool) else f"{other} other than {_show(off)}"
                raise ConfigError(f"{set_} ({src}) acts only with {want}; set it or {undo}")
        for degree, least in sw.min_degree:
            have = getattr(layout, degree)
            if have < least:
                raise ConfigError(
                    f"{set_} ({src}) needs {DEGREES.get(degree, degree)} >= {least}, but the layout "
                    f"has {degree.upper()} {have}; {undo}"
                )


def missing_libraries(bench: Benchmark, config: dict) -> dict[str, list[tuple[str, Any]]]:
    """{library: [(switch, its off value), ...]} for the switches set (not `off`) in a resolved
    config (RunPlan.config) whose library is not installed in this Python."""
    out: dict[str, list[tuple[str, Any]]] = {}
    for name, sw in bench.config.SWITCHES.items():
        if sw.library and config.get(name, sw.off) != sw.off and find_spec(sw.library) is None:
            out.setdefault(sw.library, []).append((name, sw.off))
    return out


def library_notes(bench: Benchmark, config: dict) -> list[str]:
    """What --dry-run says instead of refusing (one line per missing library)."""
    return [
        f"would be refused here: {lib} is not installed ({', '.join(n for n, _ in sets)})"
        for lib, sets in missing_libraries(bench, config).items()
    ]


def require_libraries(bench: Benchmark, config: dict) -> None:
    """Raise ConfigError (one line, exit 2) when a switch set needs a library that is absent."""
    missing = missing_libraries(bench, config)
    if not missing:
        return
    need = "; ".join(
        f"{', '.join(f'{n}={_show(config[n])}' for n, _ in sets)} need{'s' if len(sets) == 1 else ''} {lib}"
        for lib, sets in missing.items()
    )
    undo = " ".join(f"--set {n}={_show(off)}" for sets in missing.values() for n, off in sets)
    raise ConfigError(f"{need}, which is not installed here; install it (docs/install-gpu.md) or {undo}")
