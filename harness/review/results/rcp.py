"""`results score --rcp`: the official RCP verdict and scaling factor, without touching the tree.

The package's `rcp_checker.check_directory` runs unchanged (pruned RCPs, interpolation between
the nearest batch sizes, the smallest RCP for a batch below every RCP, the t-test bound), as the
result summarizer runs it on closed-division folders (`rcp_pass='pruned_rcps'`,
`set_scaling=True`), with one difference: its checker class is swapped, for the call, for a
subclass whose two file-writing methods record instead of write. So we learn what the official
tool would leave in `scaling.json` (the factor it writes, 1.0 where it deletes the file, the
committed file where it stops before) while the folder is never modified. Its own reading of the
logs runs with check.official.fast_token_regex (the same lines, without the quadratic regex).
"""

from __future__ import annotations

import logging
import threading

from harness.core import rulesets as rules
from harness.review.check.official import fast_token_regex

_lock = threading.Lock()


def rcp_check(folder: str, ruleset: str, committed_factor: float, division: str | None) -> dict:
    """{rcp, rcp_message, rcp_factor, rcp_record} for one result folder (never raises)."""
    out = {"rcp": None, "rcp_message": None, "rcp_factor": None, "rcp_record": None}
    if division != "closed":
        out["rcp"] = "n/a"
        out["rcp_message"] = f"{division or 'unknown'} division: the RCP check applies to closed results"
        return out
    from mlperf_logging.rcp_checker import rcp_checker

    seen: dict = {}

    class ReadOnly(rcp_checker.RCP_Checker):
        def _set_results_scaling(self, scale_factor, results_dir):
            seen["written"] = float(scale_factor)

        def _reset_results_scaling(self, results_dir):
            seen["reset"] = True

        def _eval_submission_record(self, rcp_record, subm_epochs, results_dir):
            ok, norm = super()._eval_submission_record(rcp_record, subm_epochs, results_dir)
            seen["record"] = {
                "bs": rcp_record.get("BS"),
                "rcp_mean": float(rcp_record["RCP Mean"]),
                "lowest_accepted_mean": float(rcp_record["RCP Mean"] / rcp_record["Max Speedup"]),
                "submission_epochs": [float(x) for x in subm_epochs],
            }
            return ok, norm

    root = logging.getLogger()
    level = root.level
    with _lock:
        real = rcp_checker.RCP_Checker
        rcp_checker.RCP_Checker = ReadOnly
        root.setLevel(logging.ERROR)
        try:
            with fast_token_regex(rcp_checker):  # it re-reads the logs with the quadratic regex
                ok, msg, _norm = rcp_checker.check_directory(
                    folder, rules.USAGE, ruleset, False, False, rcp_pass="pruned_rcps", set_scaling=True
                )
        except Exception as e:  # noqa: BLE001 - e.g. no RCP file for the benchmark: a verdict, not a crash
            ok, msg = False, f"the RCP checker crashed ({type(e).__name__}: {e})"
        finally:
            rcp_checker.RCP_Checker = real
            root.setLevel(level)
    out["rcp"] = "pass" if ok else "fail"
    out["rcp_message"] = msg
    if "written" in seen:
        out["rcp_factor"] = seen["written"]
    elif seen.get("reset"):
        out["rcp_factor"] = 1.0  # the official tool deletes scaling.json: no scaling
    else:
        out["rcp_factor"] = committed_factor  # it stopped before the comparison: file left as is
    out["rcp_record"] = seen.get("record")
    return out
