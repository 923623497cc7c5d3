"""Turn RunPlans into processes. The only package that starts processes.

A launcher gets all plans of one `mlperf run` at once (Slurm makes them one job each or an
array), starts them, calls `monitor.poll(plan)` while a run is live (progress from its MLPerf
log) and `monitor.finished(plan, returncode)` as each ends, in whatever order they end.
On Ctrl-C it stops or cancels what it started and re-raises KeyboardInterrupt.
"""

from __future__ import annotations

import importlib
from typing import Protocol

from harness.errors import ConfigError, suggest
from harness.plan import RunPlan

KINDS = {
    "local": "harness.launch.local:LocalLauncher",
    "torchrun": "harness.launch.local:TorchrunLauncher",
    "slurm": "harness.launch.slurm:SlurmLauncher",
}


class Monitor(Protocol):
    def poll(self, plan: RunPlan) -> None: ...

    def finished(self, plan: RunPlan, returncode: int) -> None: ...


class Launcher(Protocol):
    name: str

    def describe(self, plans: list[RunPlan], system, entry: str) -> str:
        """What --dry-run prints: the exact command line(s) or the sbatch script."""

    def run(self, plans: list[RunPlan], system, entry: str, monitor: Monitor) -> None: ...


def choose(kind: str | None, system, world_size: int) -> str:
    """The launcher: --launcher, else the system's; a one-process launcher can't run N ranks."""
    k = kind or system.launcher.kind
    if k not in KINDS:
        raise ConfigError(
            f"--launcher {k}: unknown launcher{suggest(k, KINDS)}; choose one of {', '.join(KINDS)}"
        )
    if k == "local" and world_size > 1:
        k = "torchrun"  # N ranks on one host: torchrun is the standard rendezvous
    if k == "torchrun" and system.nodes > 1:
        raise ConfigError(
            f"system '{system.name}' has {system.nodes} nodes: torchrun alone launches one node; "
            f"use --launcher slurm"
        )
    return k


def get(kind: str, **options) -> Launcher:
    module, cls = KINDS[kind].split(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError:
        raise ConfigError(f"launcher '{kind}' is not available in this installation") from None
    return getattr(mod, cls)(**options)
