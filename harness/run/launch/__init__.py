"""Turn RunPlans into processes. The only package that starts processes.

A launcher gets all plans of one `mlperf run` at once (Slurm makes them one job each or an
array), starts them, calls `monitor.poll(plan)` while a run is live (progress from its MLPerf
log) and `monitor.finished(plan, returncode)` as each ends, in whatever order they end.
On Ctrl-C it stops or cancels what it started and re-raises KeyboardInterrupt.
"""

from __future__ import annotations

import importlib
from typing import Protocol

from harness.core.errors import ConfigError
from harness.core.runplan import RunPlan

# One class per kind of harness.resolve.runplans.LAUNCHERS (which one a run uses is resolved there).
KINDS = {
    "local": "harness.run.launch.local:LocalLauncher",
    "torchrun": "harness.run.launch.local:TorchrunLauncher",
    "slurm": "harness.run.launch.slurm:SlurmLauncher",
}


class Monitor(Protocol):
    def poll(self, plan: RunPlan) -> None: ...

    def finished(self, plan: RunPlan, returncode: int) -> None: ...


class Launcher(Protocol):
    name: str

    def describe(self, plans: list[RunPlan], system, entry: str) -> str:
        """What --dry-run prints: the exact command line(s) or the sbatch script."""

    def run(self, plans: list[RunPlan], system, entry: str, monitor: Monitor) -> None: ...


def get(kind: str, **options) -> Launcher:
    module, cls = KINDS[kind].split(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError:
        raise ConfigError(f"launcher '{kind}' is not available in this installation") from None
    return getattr(mod, cls)(**options)
