"""What `mlperf diagnose` knows of the run's processes and of the host beside it (torch-free).

- processes(): how many processes trained: the plan's world size, else ranks.json, else the
  accelerators of a submission tree's system JSON. One process runs no collective, so an unstable
  step time cannot be the network there (issue 47: a one-process CPU run beside other work was
  blamed on "network congestion").
- load(): RUN_DIR/host_load.json (harness/train/timings.py writes it at the start and end of
  every run): the host's load average and core count. A load above the core count means runnable
  threads queued for a core: other work shared the host. That is evidence about the host, said
  beside the findings, never a finding against the code.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from harness.core.runfolder import HOST_LOAD_FILE, RANKS_FILE


def processes(run_dir: Path | None, plan, accelerators: int | None) -> int | None:
    if plan is not None:
        return plan.layout.world_size
    if run_dir is not None:
        try:
            rows = json.loads((run_dir / RANKS_FILE).read_text())
            if isinstance(rows, list) and rows:
                return len(rows)
        except (OSError, ValueError):
            pass
    return accelerators  # one process per accelerator in every published log; None: unknown


def _num(x) -> float | None:
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
    return float(x) if ok else None


def load(run_dir: Path | None) -> dict | None:
    """{"cores", "load_1m_start", "load_1m_end"} from host_load.json; None where there is none or
    it is unreadable (an older run, a loose log)."""
    if run_dir is None:
        return None
    try:
        doc = json.loads((run_dir / HOST_LOAD_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(cores := doc.get("cores"), int) or cores < 1:
        return None
    out: dict = {"cores": cores}
    for when in ("start", "end"):
        rec = doc.get(when)
        avg = rec.get("load_avg") if isinstance(rec, dict) else None
        one = _num(avg[0]) if isinstance(avg, list) and avg else None
        if one is not None:
            out[f"load_1m_{when}"] = one
    return out if len(out) > 1 else None


def busy(host: dict | None) -> str | None:
    """'the host was busy: load average X on N cores ...' when the highest 1-minute load seen
    beside the run exceeds the host's cores (the run itself counts: it alone reaches about its own
    threads, so only more than every core means others queued beside it); else None."""
    if not host:
        return None
    peak = max(v for k, v in host.items() if k.startswith("load_1m_"))
    if peak <= host["cores"]:
        return None
    seen = ", ".join(
        f"{k.removeprefix('load_1m_')} {v:g}" for k, v in host.items() if k.startswith("load_1m_")
    )
    return (
        f"the host was busy: load average {peak:g} on {host['cores']} cores (1-minute, {seen}): other "
        "work competed for the cores, so step times and time to train are slower than the code's own"
    )


# Why one process stalls: no collective runs, so the causes are on the host itself.
ONE_PROCESS_CAUSE = (
    "other work on the host or the run's own I/O (one process: no collectives, not the network)"
)
ONE_PROCESS_REMEDY = [
    "look for other work on the host while the run trains (`uptime`, `top`): the load average beside "
    "the run is in host_load.json; rerun on an idle host or pin the run to free cores",
    "periodic stalls also come from checkpointing or logging to a slow or shared filesystem "
    "(checkpoint_interval_steps, a local disk for the run folder)",
    "Python garbage collection or memory pressure (swap): compare max_rss_mb in timings.jsonl with the free memory",
]
