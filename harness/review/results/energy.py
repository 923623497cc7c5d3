"""Energy to train (joules) of a result folder with `power/` logs, as the official summarizer
computes it (mlperf-logging 4.1.68, `result_summarizer._compute_total_power` and callers):

  per counted run r: E_r = sum over power/result_<r>/node_*.txt of _compute_power_node(lines, t_r)
                         + sum over power/result_<r>/sw_*.txt of _compute_power_sw(lines, t_r)
     (t_r the run's run_stop - run_start in ms; the files in glob order);
  energy = the olympic mean of the E_r taken in the order of the runs' times (ties in glob order),
     with the same dropped-run allowance as the time, times the committed scaling.json factor.

The per-file arithmetic and the olympic step repeat the package's functions operation for
operation (`_compute_power_node`, `_compute_power_sw`, `_index_olympic_average`): importing them
costs seconds (the summarizer module imports pandas and, through the RCP checker, scipy.stats),
more than scoring a whole tree. tests/integration/test_results_rounds.py holds them equal to the
package's on every fixture power log. Where the official tool crashes --
a node file without power_measurement_start, a zero-length measurement window (v4.0 smc-*-power),
a run without power/result_<r>/node_*.txt, a reading that is not a number -- the folder gets one
problem naming the file and the cause, and no energy; its time score stands.
"""

from __future__ import annotations

import glob
import os

from harness.review.check.official import parse


def has_power(folder: str) -> bool:
    """The summarizer's test: a sub-folder named `power`."""
    return os.path.isdir(os.path.join(folder, "power"))


def _files(folder: str, result: str, kind: str) -> list[str]:
    return glob.glob(os.path.join(glob.escape(folder), "power", glob.escape(result), f"{kind}_*.txt"))


def node_energy(loglines: list, time_to_train_ms: float) -> float:
    """result_summarizer._compute_power_node: readings integrated over the measurement window,
    scaled to the run's time (W x ms / 1000 = J)."""
    prev = last = start = stop = 0
    agg, eff = 0, 1.0
    stop_found = start_found = False
    for ll in sorted(loglines, key=lambda x: x.timestamp):
        if ll.key == "power_measurement_start":
            start = prev = ll.timestamp
            start_found = True
        if ll.key == "power_reading" and not stop_found and start_found:
            agg += ll.value["value"] * (ll.timestamp - prev)
            prev = ll.timestamp
            last = max(last, ll.timestamp)
        if ll.key == "power_measurement_stop":
            stop = ll.timestamp
            stop_found = True
        if ll.key == "conversion_eff":
            eff = ll.value["value"]
    if not start_found:
        raise ValueError("no power_measurement_start")
    if not stop_found:
        stop = last  # as the summarizer does (it prints a warning)
    return eff * agg * time_to_train_ms / (stop - start) / 1000


def switch_energy(loglines: list, time_to_train_ms: float) -> float:
    """result_summarizer._compute_power_sw: the estimated interconnect power over the run."""
    agg, eff = 0, 1.0
    for ll in loglines:
        if ll.key == "conversion_eff":
            eff = ll.value["value"]
        if ll.key == "interconnect_power_est":
            agg = ll.value["value"]
            break
    return eff * agg * time_to_train_ms / 1000


def run_energy(folder: str, result_file: str, time_to_train_ms: float, ruleset: str) -> float:
    """Joules of one run; raises ValueError with a one-line cause where the official tool crashes."""
    result = os.path.basename(result_file).split(".")[0]
    nodes, switches = _files(folder, result, "node"), _files(folder, result, "sw")
    if not nodes:
        raise ValueError(f"power/{result}/ has no node_*.txt")
    total = 0
    for files, compute in ((nodes, node_energy), (switches, switch_energy)):
        for f in files:
            name = os.path.relpath(f, folder)
            try:
                loglines, _failed = parse(f, ruleset)  # the summarizer ignores unparsable lines too
                total += compute(loglines, time_to_train_ms)
            except ZeroDivisionError:
                raise ValueError(
                    f"{name}: zero-length measurement window (power_measurement_stop at its start)"
                ) from None
            except OSError as e:
                raise ValueError(f"{name}: unreadable ({e.strerror or e})") from e
            except Exception as e:  # noqa: BLE001 - whatever crashes the official tool, named
                raise ValueError(f"{name}: {type(e).__name__}: {e}") from e
    return total


def index_olympic_mean(values: list, index: list, dropped: int, max_dropped: int) -> float | None:
    """result_summarizer._index_olympic_average: `values` taken in the order `index`, then
    the olympic mean as for the times."""
    ordered = [values[i] for i in index]
    countable = ordered[max_dropped : len(values) - (max_dropped - dropped)]
    return sum(countable) * 1.0 / len(countable) if countable else None


def folder_energy(folder: str, counted: list, dropped: int, max_dropped: int, factor: float, ruleset: str):
    """(energy_j or None, per-run joules by path, problem or None).

    `counted` is [(result file, time_to_train_ms)] for the runs that count, in glob order;
    `dropped` the number of runs that do not."""
    per_run = {}
    try:
        for path, ms in counted:
            per_run[path] = run_energy(folder, path, ms, ruleset)
    except ValueError as e:
        return None, per_run, f"power/ logs: {e}; no energy score (the official summarizer crashes here)"
    if dropped > max_dropped or not counted:
        return None, per_run, None
    times = [ms / 60 / 1000 for _p, ms in counted]
    index = [i for i, _t in sorted(enumerate(times), key=lambda x: x[1])]
    mean = index_olympic_mean([per_run[p] for p, _ms in counted], index, dropped, max_dropped)
    return (None if mean is None else mean * factor), per_run, None
