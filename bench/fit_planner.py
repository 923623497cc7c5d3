"""Fit the planner's efficiency constants on the published results the project ships.

    python bench/fit_planner.py            # fit on every row of harness/planner/data/published.yaml, print
    python bench/fit_planner.py --write    # ... and store the constants in harness/planner/data/efficiency.yaml
    python bench/fit_planner.py --exclude gpt3/eos_n64 --exclude gnn/h200   # hold rows out of the fit

Prints each constant, each row's prediction and error, and the median / p90 absolute percentage
error on the rows it was fitted on (bench/bench_planner_accuracy.py gives the held-out errors).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.planner import calibration as C  # noqa: E402
from harness.planner import fitting as F  # noqa: E402
from harness.planner.hardware import DATA  # noqa: E402


def write(k: dict, rows, med: float, p90: float) -> None:
    """Replace the `fitted`, `fitted_on` and `fit_error` blocks, keeping the file's comments."""
    path = DATA / "efficiency.yaml"
    text = path.read_text()
    head = text[: text.index("fitted:")]
    lines = ["fitted:"]
    for key in (
        "mfu",
        "step_overhead_s",
        "dp_overlap",
        "eval_overhead_s",
        "tp_exposed_no_overlap",
        "gather_eff",
        "family",
    ):
        v = k[key]
        if isinstance(v, dict):
            inner = ", ".join(f"{s}: {x:.6g}" for s, x in v.items())
            lines.append(f"  {key}: {{{inner}}}")
        else:
            lines.append(f"  {key}: {v:.6g}")
    lines.append("fitted_on:")
    lines += [f"  - {r.id}" for r in rows]
    lines.append(f"fit_error: {{median_ape: {med:.2f}, p90_ape: {p90:.2f}, rows: {len(rows)}}}")
    path.write_text(head + "\n".join(lines) + "\n")
    C.efficiency_file.cache_clear()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="store the fitted constants in efficiency.yaml")
    ap.add_argument("--exclude", action="append", default=[], help="row id (regex) to leave out of the fit")
    args = ap.parse_args(argv)

    rows = [r for r in C.published() if not any(re.fullmatch(p, r.id) for p in args.exclude)]
    k = F.fit(rows)
    print("constants (fitted):")
    for key, sub, start, *_ in F.PARAMS:
        v = F.value(k, key, sub)
        print(f"  {key + ('.' + sub if sub else ''):34s} {v:10.5g}   (start {start:g})")
    print(f"\n{'row':32s} {'published':>10s} {'predicted':>10s} {'APE %':>7s}  fitted")
    errs = []
    for r in C.published():
        p = C.predict(r, k)
        used = r in rows
        if used:
            errs.append(F.ape(p, r.score_min))
        print(
            f"{r.id:32s} {r.score_min:10.3f} {p:10.3f} {F.ape(p, r.score_min):7.1f}  {'yes' if used else 'no'}"
        )
    med, p90 = F.summary(errs)
    print(f"\nfit error on {len(errs)} fitted rows: median APE {med:.1f} %, p90 APE {p90:.1f} %")
    if args.write:
        write(k, rows, med, p90)
        print(f"wrote {DATA / 'efficiency.yaml'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
