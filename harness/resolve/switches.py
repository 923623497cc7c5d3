"""No silent switches: a switch the implementation would not honour here is refused with one line.

Each typed config declares its switches (`SWITCHES` in benchmarks/<name>/config.py, a
`benchmarks.base.Switch` each): the device kinds whose code path honours it, the switches it needs,
the layout degrees it needs. `check` runs once per resolved config (harness/resolve/runplans.py),
the same way for CPU and GPU systems, before anything is written or launched:

    mlperf run gnn --system dgx-h100x8 --set cuda_graphs=true --dry-run
    -> cuda_graphs=true: the gnn implementation has no such path (...); --set cuda_graphs=false
"""

from __future__ import annotations

from typing import Any

from harness.core.errors import ConfigError
from harness.core.layout import DEGREES


def _show(v: Any) -> str:
    """A value as `--set` spells it (YAML scalars: true/false, not True/False)."""
    return str(v).lower() if isinstance(v, bool) else str(v)


def check(bench: str, cfg, provenance: dict[str, str], system_name: str, kind: str, layout) -> None:
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
                f"{set_} ({src}): the {bench} implementation has no such path ({sw.why}); {undo}"
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
