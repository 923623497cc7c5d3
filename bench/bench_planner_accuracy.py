"""How well does `mlperf plan` predict published results it has not seen? Measured, not asserted.

    python bench/bench_planner_accuracy.py           # held-out errors over data/published.yaml
    python bench/bench_planner_accuracy.py --write   # ... and store them in data/accuracy.yaml
                                                     #     (what `mlperf plan --json` reports)
    python bench/fit_planner.py --import-fixture DIR --next   # regenerate data/published_v4.1.yaml

Forward in time first (what a user asking about next round's machines gets): fit on v3.0 ->
predict v3.1; fit on v3.0-v3.1 -> predict v4.0; fit on v3.0-v4.0 -> predict the next round (v4.1,
84 rows), each fit from the first-principles starting values (nothing of a later round leaks in
through the start). The 80 % interval constants (harness/planner/interval.py) are estimated on
all forward residuals (shipped), and their coverage is measured held out: constants from the
steps before the last, applied to the last step's rows.

Rows: the 172 published MLPerf Training v3.0-v4.1 results of the four benchmarks
(MLCommons' training_results_v3.0 ... v4.1, as data/published.yaml + published_v4.1.yaml). Shuffled
(after the forward figures), each row is predicted as
`mlperf plan --system-json` would (best layout at its batch, under its recognised stack) from
constants fitted WITHOUT it:
  leave one system out     all rows of the same system (submitter + system name, every round)
                           are held out together, the constants refitted on the rest
  leave one submitter out  all rows of one submitter (those with several rows) held out together
  baseline                 time = a x accelerators^b per (benchmark, accelerator), leave one
                           system out (one row: b = -1; none: the benchmark's rows on any accelerator)
Printed: every row, then the median and 90th percentile of the absolute percentage error per
benchmark and overall, and the stacks and accelerator families the constants have no rows for.
The in-sample line (constants fitted on all rows) is labelled as such and is not what the
planner reports. Takes ~5-15 minutes on 2 cores (one refit per held-out group).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from harness.planner import calibration as C  # noqa: E402
from harness.planner import fitting as F  # noqa: E402
from harness.planner import forward as FW  # noqa: E402
from harness.planner import hardware as H  # noqa: E402
from harness.planner import search as SE  # noqa: E402
from harness.planner import stacks as S  # noqa: E402
from harness.planner.hardware import DATA  # noqa: E402

METHODS = {"leave_one_system_out": "system", "leave_one_submitter_out": "submitter"}


def stats(rows, pred) -> dict:
    out = {}
    for bench in (*F.benches(), "overall"):
        errs = [
            F.ape(pred[r.id], r.score_min) for r in rows if r.id in pred and bench in (r.bench, "overall")
        ]
        med, p90 = F.summary(errs)
        out[bench] = {"median_ape": round(med, 2), "p90_ape": round(p90, 2), "rows": len(errs)}
    return out


def no_data(rows) -> dict:
    """Stacks and accelerator families of the tables that no published row exercises."""
    seen_stacks = {r.stack().name for r in rows}
    seen_fams = {r.hardware().family for r in rows}
    fams = sorted({e["family"] for e in H.catalogue()} - seen_fams)
    accs = sorted(e["name"] for e in H.catalogue() if e["family"] not in seen_fams)
    return {
        "stacks": sorted(set(S.definitions()) - seen_stacks),
        "families": fams,
        "accelerators": accs,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="store the held-out errors in data/accuracy.yaml")
    args = ap.parse_args(argv)
    t0 = time.time()
    rows = list(C.published())
    fwd = FW.forward(rows)
    print(f"forward in time ({time.time() - t0:.0f} s): fit on earlier rounds, predict the next")
    for s in fwd["steps"]:
        o = s["overall"]
        print(
            f"  fit {s['fit_on']:9s} ({s['fitted_rows']:3d} rows) -> {s['predict']} ({o['rows']} rows): "
            f"median {o['median_ape']:.1f} %, p90 {o['p90_ape']:.1f} %, mean signed {o['mean_signed_pct']:+.1f} %"
        )
        for g in ("by_benchmark", "by_family", "by_stack"):
            print(
                "    "
                + "; ".join(
                    f"{n} {v['median_ape']:.1f}/{v['p90_ape']:.1f}/{v['mean_signed_pct']:+.1f} ({v['rows']})"
                    for n, v in s[g].items()
                )
            )
    cov = fwd["coverage_80"]
    print(f"  80 % interval: {fwd['interval']}")
    print(f"  coverage: {', '.join(f'{k} {v} %' for k, v in cov.items() if not isinstance(v, dict))}")
    k = F.fit(rows, start=C.constants())
    preds = {"in_sample": {r.id: SE.predict(r, k) for r in rows}}
    for name, by in METHODS.items():
        preds[name] = F.held_out(rows, by, start=k)
        print(f"{name}: {len(preds[name])} rows ({time.time() - t0:.0f} s)", file=sys.stderr)
    base = F.baseline_held_out(rows, "system")

    print(
        f"{'row':62s} {'published':>9s} | {'sys-out':>8s} {'APE':>5s} | {'subm-out':>8s} {'APE':>5s} | {'p.law':>8s} {'APE':>5s}"
    )
    for r in rows:
        a = r.score_min
        cells = []
        for p in (preds["leave_one_system_out"], preds["leave_one_submitter_out"], base):
            v = p.get(r.id)
            cells.append(f"{v:8.2f} {F.ape(v, a):5.1f}" if v is not None else f"{'-':>8s} {'-':>5s}")
        print(f"{r.id[:62]:62s} {a:9.2f} | " + " | ".join(cells))

    summary = {name: stats(rows, preds[name]) for name in METHODS}
    summary_base = stats(rows, base)
    print(
        f"\n{'absolute percentage error':34s} "
        + " ".join(f"{b[:14]:>16s}" for b in (*F.benches(), "overall"))
    )
    for name, s in [
        *summary.items(),
        ("baseline (power law, sys-out)", summary_base),
        ("IN-SAMPLE (not held out)", stats(rows, preds["in_sample"])),
    ]:
        print(
            f"{name:34s} "
            + " ".join(
                f"{s[b]['median_ape']:6.1f}/{s[b]['p90_ape']:5.1f} ({s[b]['rows']:2d})"
                for b in (*F.benches(), "overall")
            )
        )
    gaps = no_data(rows)
    print(
        f"\n(median/p90 %, rows) -- no published rows for stacks {', '.join(gaps['stacks'])}; "
        f"accelerator families {', '.join(gaps['families'])} ({len(rows)} rows, {time.time() - t0:.0f} s)"
    )
    if args.write:
        doc = {
            "source": "python bench/bench_planner_accuracy.py --write; rows: data/published.yaml "
            f"and data/{C.NEXT_ROUND} (the {len(rows)} published MLPerf Training v3.0-v4.1 results; "
            "forward chaining fits each round on the earlier ones only)",
            "rows": len(rows),
            "forward_chaining": {k: v for k, v in fwd.items() if k != "rows"},
            "interval": fwd["interval"],
            "held_out_note": "held_out: shuffled within v3.0-v4.1 (leave one system / submitter out), "
            "not forward in time",
            "held_out": summary,
            "baseline_power_law_leave_one_system_out": summary_base,
            "no_data": gaps,
            "predictions": {
                r.id: {
                    "published": r.score_min,
                    **{m: round(preds[m][r.id], 3) for m in METHODS if r.id in preds[m]},
                }
                for r in rows
            },
            "forward_predictions": fwd["rows"],
        }
        head = "# Held-out accuracy of `mlperf plan` (written by bench/bench_planner_accuracy.py --write; do not edit).\n"
        (DATA / "accuracy.yaml").write_text(head + yaml.safe_dump(doc, sort_keys=False, width=120))
        print(f"wrote {DATA / 'accuracy.yaml'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
