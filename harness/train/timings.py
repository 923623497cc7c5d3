"""`run_dir/timings.jsonl`: one row per optimizer step, written by rank 0 of every benchmark's loop.

    with Timings(rt) as timings:                       # rank 0 writes, other ranks do nothing
        ...
        timings.row(step, time.perf_counter() - t0, wait, samples=gbs)
        timings.set_loss(loss)                         # at an eval point: the newest row's loss

The columns are TIMINGS_COLUMNS of harness/core/runfolder.py (`mlperf diagnose` and the planner's
calibration read them with `read_timings`). Rows are kept in memory and written in one `write` of
whole lines at `flush()` (the loops call it at eval points), every `flush_every_s` seconds and at
`close()`: no per-step file I/O, no host-device sync (the loss is a float the loop already read),
and a kill -9 leaves whole lines only. A resumed run appends to the interrupted attempt's rows
(`read_timings` keeps the last row of a step that both logged).
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

from harness.core.files import append_lines, atomic_write
from harness.core.runfolder import HOST_LOAD_FILE, TIMINGS_FILE


def _load_now() -> dict:
    """The host's 1/5/15-minute load averages (one syscall; None where the OS has none)."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"time": round(time.time(), 3), "load_avg": load}


class Timings:
    def __init__(self, rt, flush_every_s: float = 30.0):
        self._path = Path(rt.plan.run_dir) / TIMINGS_FILE if rt.is_rank0 else None
        self._lines: list[str] = []
        self._pending: dict | None = None  # the newest row: an eval point may still add its loss
        self._every, self._last_flush = flush_every_s, time.monotonic()
        self._check_tail = bool(rt.plan.resume_from)  # a resume appends to a killed attempt's rows
        if self._path is not None and not rt.plan.resume_from:
            self._path.write_bytes(b"")
        # host_load.json: the load beside the run, so `mlperf diagnose` can tell a host shared with
        # other work from slow code. Written at start (a killed run keeps it) and again at close.
        self._host = None
        if self._path is not None:
            self._host = {"cores": os.cpu_count(), "start": _load_now()}
            self._write_host()

    def row(self, step: int, step_time_s: float, data_wait_s: float, samples: int, loss: float | None = None):
        """Record optimizer step `step` (1-based count of steps done) that took `step_time_s`,
        `data_wait_s` of it waiting for its batch, and consumed `samples` over all ranks."""
        if self._path is None:
            return
        self._queue()
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        self._pending = {
            "step": step,
            "step_time_s": round(step_time_s, 6),
            "data_wait_s": round(data_wait_s, 6),
            "samples": samples,
            "samples_per_s": round(samples / step_time_s, 3) if step_time_s > 0 else None,
            "loss": None if loss is None else round(float(loss), 6),
            "max_rss_mb": round(rss_mb, 1),
        }
        if time.monotonic() - self._last_flush >= self._every:
            self.flush()

    def set_loss(self, loss: float) -> None:
        """The training loss of the newest row (read at an eval point, where it is synced anyway)."""
        if self._pending is not None:
            self._pending["loss"] = round(float(loss), 6)

    def _queue(self) -> None:
        if self._pending is not None:
            self._lines.append(json.dumps(self._pending) + "\n")
            self._pending = None

    def flush(self) -> None:
        """Write every row so far (whole lines, one write)."""
        if self._path is None:
            return
        self._queue()
        self._last_flush = time.monotonic()
        if not self._lines:
            return
        data = "".join(self._lines).encode()
        self._lines.clear()
        append_lines(self._path, data, after_torn=self._check_tail)
        self._check_tail = False

    def _write_host(self) -> None:
        assert self._path is not None and self._host is not None
        atomic_write(self._path.with_name(HOST_LOAD_FILE), json.dumps(self._host) + "\n")

    def close(self) -> None:
        self.flush()
        if self._path is not None and self._host is not None:
            self._host["end"] = _load_now()
            self._write_host()
        self._path = None

    def __enter__(self) -> Timings:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
