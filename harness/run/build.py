"""`mlperf run --dry-run --build`: build each distinct rank shard of resolved configs, in a child.

    reports = build([resolved, ...])     # one report dict per resolved config, in order

The build imports torch, so it runs the way training code runs: `python -m reference_impls.<name>
--plan a.json [--plan b.json ...]` with the plans' task "build" (harness/train/entry.py -> impl.build),
one child per benchmark whatever the number of configs (megatron/diffusers import once), in a
scratch folder that is removed afterwards: a dry run writes nothing under results/. A config that
cannot build comes back as the child's one line, raised as ConfigError (exit 2).
"""

from __future__ import annotations

import json
import resource
import tempfile
import time
from pathlib import Path

from harness.core.errors import ConfigError, HarnessError
from harness.resolve.runplans import Resolved, runnable
from harness.run import launch


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's finished children."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def build(resolved: list[Resolved]) -> list[dict]:
    """Build every config's shards; each report gains `wall_s`/`cpu_s` of its benchmark's child."""
    reports: list[dict | None] = [None] * len(resolved)
    by_bench: dict[str, list[int]] = {}
    for i, r in enumerate(resolved):
        by_bench.setdefault(r.benchmark.name, []).append(i)
    for bench, idx in by_bench.items():
        with tempfile.TemporaryDirectory(prefix=f"mlperf-build-{bench}-") as tmp:
            plans, files = [], []
            for i in idx:
                run_dir = Path(tmp, str(i))
                run_dir.mkdir()
                # one thread: a meta-device build computes nothing, and threads only add CPU time
                update = {"task": "build", "run_dir": str(run_dir), "threads_per_process": 1}
                plan = resolved[i].plans[0].model_copy(update=update)
                plan.save(run_dir / "plan.json")
                plans.append(plan)
                files.append(run_dir / "plan.json")
            t0, c0 = time.perf_counter(), children_cpu_s()
            impl = runnable(resolved[idx[0]].benchmark)
            rc, last = launch.get("local").run_module(
                plans[0], resolved[idx[0]].system, impl.module, files, log_name="build.log"
            )
            wall, cpu = time.perf_counter() - t0, children_cpu_s() - c0
            if rc != 0:
                cause = last.removeprefix("error: ").strip() or f"{bench}: the build exited {rc}"
                raise (ConfigError if rc == 2 else HarnessError)(cause)
            for i, plan in zip(idx, plans, strict=True):
                rep = json.loads(Path(plan.run_dir, "build.json").read_text())
                reports[i] = dict(rep, wall_s=round(wall, 1), cpu_s=round(cpu, 1), configs_in_child=len(idx))
    return reports  # type: ignore[return-value]
