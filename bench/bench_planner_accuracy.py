"""How well does `mlperf plan` predict published results? Measured, not asserted.

    python bench/bench_planner_accuracy.py           # every row of harness/planner/data/published.yaml
    python bench/bench_planner_accuracy.py --quick   # skip the leave-one-out refits

For every published result the project ships, predict its score from the submitter's own layout on
its own system and print the absolute percentage error (APE):
  fitted      with the shipped constants (data/efficiency.yaml, fitted on the rows listed there)
  held-out    leave-one-out: the constants refitted on all other rows, then this row predicted —
              the error to expect on a result the planner has never seen
  baseline    the best simple alternative: time = a x accelerators^b per (benchmark, accelerator),
              in-sample and leave-one-out (one row: b = -1; none: the benchmark's rows on any accelerator)
and the median and 90th percentile of each column.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.planner import calibration as C  # noqa: E402
from harness.planner import fitting as F  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="skip the leave-one-out refits")
    args = ap.parse_args(argv)
    t0 = time.time()
    rows = list(C.published())
    k = C.constants()
    fitted_on = set(C.efficiency_file().get("fitted_on") or [])
    fitted = {r.id: C.predict(r, k) for r in rows}
    loo = {} if args.quick else F.leave_one_out(rows)
    base_in = F.baseline_in_sample(rows)
    base_loo = F.baseline_leave_one_out(rows)

    print(
        f"{'row':30s} {'published':>9s} | {'fitted':>8s} {'APE':>5s} | {'held-out':>8s} {'APE':>5s} | "
        f"{'power law':>9s} {'APE':>5s} | {'p.l. LOO':>8s} {'APE':>5s}"
    )
    cols: dict[str, list[float]] = {
        "fitted (rows fitted on)": [],
        "fitted (rows not fitted on)": [],
        "held-out (leave-one-out)": [],
        "baseline in-sample": [],
        "baseline leave-one-out": [],
    }
    for r in rows:
        a = r.score_min
        e_fit = F.ape(fitted[r.id], a)
        cols["fitted (rows fitted on)" if r.id in fitted_on else "fitted (rows not fitted on)"].append(e_fit)
        e_loo = F.ape(loo[r.id], a) if loo else float("nan")
        if loo:
            cols["held-out (leave-one-out)"].append(e_loo)
        e_bi, e_bl = F.ape(base_in[r.id], a), F.ape(base_loo[r.id], a)
        cols["baseline in-sample"].append(e_bi)
        cols["baseline leave-one-out"].append(e_bl)
        print(
            f"{r.id:30s} {a:9.3f} | {fitted[r.id]:8.3f} {e_fit:5.1f} | "
            f"{loo.get(r.id, float('nan')):8.3f} {e_loo:5.1f} | {base_in[r.id]:9.3f} {e_bi:5.1f} | "
            f"{base_loo[r.id]:8.3f} {e_bl:5.1f}"
        )
    print(f"\n{'absolute percentage error':32s} {'rows':>4s} {'median %':>9s} {'p90 %':>7s}")
    for name, errs in cols.items():
        if errs:
            med, p90 = F.summary(errs)
            print(f"{name:32s} {len(errs):4d} {med:9.1f} {p90:7.1f}")
    print(f"\n({len(rows)} published rows, {time.time() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
