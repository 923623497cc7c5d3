"""The power lint: what MLPerf Power requires of a result folder's `power/` logs that the official
package checker does not check (mlperf-logging 4.1.68 checks names and counts only, as warnings,
and a stray file crashes it). Rules: mlcommons/training_policies power_measurement.adoc.

    findings = lint(result_dir, base, gap_severity="warning")

Per run k (`power/result_<k>/`, which needs its `result_<k>.txt`):
  files     only node_<i>.txt and sw_<j>.txt, indices 0..n-1, the same node count in every run
  node_<i>  one power_measurement_start and one _stop, the window bracketing the run's run_start
            and run_stop; >= 60 power_reading lines from run_start to the window's end (a short run
            trains on after run_stop until they exist); readings increasing in time;
            gaps between readings <= 1 s (severity `gap_severity`: published logs sample every
            2 s); every reading a finite number >= 0 with metadata `host`; conversion_eff in (0, 1]
            with measurement_type AC or DC
  sw_<j>    interconnect_power_est present, a finite number >= 0
Each finding names the file and its first offending line. Nothing is written.
"""

from __future__ import annotations

import math
import os
import re

from harness.core.files import is_special
from harness.core.mllog_reader import iter_mllog, parse_record
from harness.core.runplan import MIN_POWER_READINGS
from harness.review.check.messages import Finding

MAX_GAP_MS = 1000
TOOL = "power lint"
_RUN = re.compile(r"result_(\d+)")
_FILE = re.compile(r"(node|sw)_(\d+)\.txt")


def _records(path: str) -> list[tuple[int, dict]]:
    """(file line, record) of every well-formed MLLOG line."""
    out = []
    for n, _idx, text in iter_mllog(path):
        rec, _ = parse_record(text)
        if rec is not None:
            out.append((n, rec))
    return out


def _run_window(log: str) -> tuple[int | None, int | None]:
    start = stop = None
    for _n, r in _records(log):
        if r.get("key") == "run_start" and start is None:
            start = r.get("time_ms")
        elif r.get("key") == "run_stop":
            stop = r.get("time_ms")
    return start, stop


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def lint(result_dir: str, base: str, gap_severity: str = "warning") -> list[Finding]:
    power = os.path.join(result_dir, "power")
    if not os.path.isdir(power):
        return []
    out: list[Finding] = []

    def add(path, line, severity, message, fix):
        out.append(Finding(os.path.relpath(path, base), line, TOOL, severity, message, fix))

    runs: dict[int, dict[str, list[int]]] = {}
    for entry in sorted(os.listdir(power)):
        path = os.path.join(power, entry)
        m = _RUN.fullmatch(entry)
        if not m or not os.path.isdir(path):
            add(
                path,
                None,
                "error",
                "not a power/result_<k> folder",
                "remove it (the package checker may crash on it)",
            )
            continue
        k = int(m[1])
        runs[k] = {"node": [], "sw": []}
        for f in sorted(os.listdir(path)):
            fm = _FILE.fullmatch(f)
            entry = os.path.join(path, f)
            if fm and is_special(entry):  # named like a power log, but reading it could block
                add(
                    entry,
                    None,
                    "error",
                    "not a regular file (a FIFO, socket or device)",
                    "replace it with the power log",
                )
                continue
            if not fm or not os.path.isfile(entry):
                add(entry, None, "error", "a stray file: only node_<i>.txt and sw_<j>.txt belong here",
                    "remove it (the package checker crashes on names like node_0.txt.bak)")  # fmt: skip
                continue
            runs[k][fm[1]].append(int(fm[2]))
    counts = {k: len(v["node"]) for k, v in runs.items()}
    if len(set(counts.values())) > 1:
        most = max(set(counts.values()), key=list(counts.values()).count)
        for k, n in sorted(counts.items()):
            if n != most:
                add(os.path.join(power, f"result_{k}"), None, "error",
                    f"{n} node file(s) where the other runs have {most}", "measure every node in every run")  # fmt: skip
    for k, kinds in sorted(runs.items()):
        folder = os.path.join(power, f"result_{k}")
        log = os.path.join(result_dir, f"result_{k}.txt")
        for kind, idx in kinds.items():
            if sorted(idx) != list(range(len(idx))):
                add(folder, None, "error", f"{kind} files numbered {sorted(idx)}, not 0..{len(idx) - 1}",
                    "number them from 0 without gaps")  # fmt: skip
        if not kinds["node"]:
            add(folder, None, "error", "no node_<i>.txt", "write one file per node")
        if not os.path.isfile(log):
            add(
                folder,
                None,
                "error",
                f"no result_{k}.txt for this power folder",
                "remove the folder or add its log",
            )
            continue
        window = _run_window(log)
        for i in sorted(kinds["node"]):
            _node(os.path.join(folder, f"node_{i}.txt"), window, gap_severity, add)
        for j in sorted(kinds["sw"]):
            _switch(os.path.join(folder, f"sw_{j}.txt"), add)
    return out


def _node(path: str, window: tuple, gap_severity: str, add) -> None:
    recs = _records(path)
    starts = [(n, r) for n, r in recs if r.get("key") == "power_measurement_start"]
    stops = [(n, r) for n, r in recs if r.get("key") == "power_measurement_stop"]
    readings = [(n, r) for n, r in recs if r.get("key") == "power_reading"]
    for name, found in (("power_measurement_start", starts), ("power_measurement_stop", stops)):
        if len(found) != 1:
            add(path, found[1][0] if found else None, "error", f"{len(found)} {name} lines, not 1",
                "log the window once: start at the first reading, stop at the last")  # fmt: skip
    effs = [(n, r) for n, r in recs if r.get("key") == "conversion_eff"]
    for n, r in effs:
        v, md = r.get("value"), r.get("metadata") or {}
        if not (_number(v) and 0 < v <= 1):
            add(
                path,
                n,
                "error",
                f"conversion_eff {v!r} is not in (0, 1]",
                "log the supply's efficiency, e.g. 0.94",
            )
        if md.get("measurement_type") not in ("AC", "DC"):
            add(
                path,
                n,
                "error",
                "conversion_eff without measurement_type AC or DC",
                "say where power was measured",
            )
    if not effs:
        add(
            path,
            None,
            "error",
            "no conversion_eff line",
            "log conversion_eff (1.0 for DC) with measurement_type",
        )
    bad = next(((n, r) for n, r in readings if not _number(r.get("value"))), None)
    if bad:
        add(path, bad[0], "error", f"power_reading {bad[1].get('value')!r} is not a number >= 0", "log watts")
    nohost = next((n for n, r in readings if not (r.get("metadata") or {}).get("host")), None)
    if nohost:
        add(path, nohost, "error", "power_reading without metadata host", "name the node in each reading")
    times = [(n, r.get("time_ms")) for n, r in readings]
    back = next(
        (n for (_, a), (n, b) in zip(times, times[1:]) if not (a is not None and b is not None and b > a)),
        None,
    )
    if back:
        add(path, back, "error", "readings not increasing in time (a repeated or earlier time_ms)",
            "stamp each reading once, with the host clock MLLOG uses")  # fmt: skip
    run_start, run_stop = window
    if starts and stops and run_start is not None and run_stop is not None:
        s, e = starts[0][1].get("time_ms"), stops[0][1].get("time_ms")
        if not (isinstance(s, int) and isinstance(e, int) and s <= run_start and e >= run_stop):
            add(path, starts[0][0], "error", f"the window {s}..{e} does not bracket the run {run_start}..{run_stop}",
                "start measuring before run_start and stop after run_stop")  # fmt: skip
        # The rules count the measurement's readings; a short run extends the window (it trains on
        # after run_stop until 60 exist), so readings after run_stop count, those before run_start not.
        inside = [t for _, t in times if isinstance(t, int) and run_start <= t <= e]
        if len(inside) < MIN_POWER_READINGS:
            add(path, None, "error", f"{len(inside)} readings from run_start to the window's end, fewer than {MIN_POWER_READINGS}",
                "sample at >= 1 Hz, and keep the loop going after run_stop until 60 readings exist")  # fmt: skip
    gaps = [
        (n, b - a)
        for (_, a), (n, b) in zip(times, times[1:])
        if isinstance(a, int) and isinstance(b, int) and b - a > MAX_GAP_MS
    ]
    if gaps:
        add(path, gaps[0][0], gap_severity,
            f"{len(gaps)} gap(s) between readings over 1 s (the largest {max(g for _, g in gaps) / 1000:.1f} s)",
            "sample at >= 1 Hz on absolute deadlines, with a per-read timeout below the interval")  # fmt: skip


def _switch(path: str, add) -> None:
    est = [(n, r) for n, r in _records(path) if r.get("key") == "interconnect_power_est"]
    if not est:
        add(path, None, "error", "no interconnect_power_est line", "log the switch's estimated power")
    for n, r in est:
        if not _number(r.get("value")):
            add(
                path,
                n,
                "error",
                f"interconnect_power_est {r.get('value')!r} is not a number >= 0",
                "log watts",
            )
