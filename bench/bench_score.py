"""Score one tree with `mlperf results score` and with the official result summarizer; print the ratio.

    python bench/bench_score.py [TREE_ROOT] [--repeat N]

TREE_ROOT defaults to ../shared/fixtures/mlperf_v4.0 (NVIDIA's published v4.0 results). Each
`<Org>` under it is summarized by `python -m mlperf_logging.result_summarizer <Org> training 4.0.0
--csv` on a temporary copy (the summarizer rewrites scaling.json), and the whole tree is scored by
`python -m harness.cli results score TREE --json`. Both are timed as child processes (wall and
CPU seconds, best of --repeat), scores are compared (must agree to 1e-6 min), and the ratio
official / ours is printed (goal >= 20x).
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TREE = ROOT.parent / "shared" / "fixtures" / "mlperf_v4.0"


def timed(cmd, cwd=None):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(map(str, cmd))}\n{p.stderr[-2000:]}")
    return wall, cpu, p.stdout


def orgs(tree: Path):
    return sorted(p for p in tree.iterdir() if (p / "results").is_dir() and (p / "systems").is_dir())


def official(tree: Path):
    """(wall, cpu, {(org, system, benchmark): score}) over every org, on a fresh copy each time."""
    scores, wall, cpu = {}, 0.0, 0.0
    with tempfile.TemporaryDirectory(prefix="bench-score-") as tmp:
        for org in orgs(tree):
            dst = Path(tmp) / org.name
            shutil.copytree(org, dst, symlinks=True)
            out = Path(tmp) / f"{org.name}.csv"
            w, c, _ = timed(
                [
                    sys.executable,
                    "-m",
                    "mlperf_logging.result_summarizer",
                    str(dst),
                    "training",
                    "4.0.0",
                    "--csv",
                    str(out),
                ],
                cwd=tmp,
            )
            wall, cpu = wall + w, cpu + c
            detailed = out.with_name(out.stem + "_detailed.csv")
            with open(detailed) as f:
                for row in csv.DictReader(f):
                    for k, v in row.items():
                        if k.endswith(":time_to_train") and v:
                            # the detailed CSV has no system folder: key on the system name
                            scores[(row["submitter"], row["system"], k.split(":")[0])] = float(v)
    return wall, cpu, scores


def ours(tree: Path):
    w, c, out = timed(
        [sys.executable, "-m", "harness.cli", "results", "score", str(tree), "--json", "--no-runs"], cwd=ROOT
    )
    doc = json.loads(out)
    scores = {(r["submitter"], r["system_name"], r["benchmark"]): r["score_min"] for r in doc["results"]}
    return w, c, scores


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree", nargs="?", default=str(DEFAULT_TREE))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    tree = Path(args.tree).resolve()
    n_files = sum(1 for _ in tree.rglob("result_*.txt"))
    best_off = min((official(tree) for _ in range(args.repeat)), key=lambda t: t[0])
    best_ours = min((ours(tree) for _ in range(args.repeat)), key=lambda t: t[0])
    mismatches = []
    for k, v in best_off[2].items():
        mine = best_ours[2].get(k)
        if mine is None or abs(mine - v) > 1e-6:
            mismatches.append((k, v, mine))
    print(f"tree: {tree} ({n_files} result files, {len(best_off[2])} scores)")
    print(f"official result_summarizer: wall {best_off[0]:.3f} s, cpu {best_off[1]:.3f} s")
    print(f"mlperf results score:       wall {best_ours[0]:.3f} s, cpu {best_ours[1]:.3f} s")
    sys.path.insert(0, str(ROOT))
    from harness.review.results.score import score_tree

    inproc = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        score_tree(tree, with_runs=False)
        inproc.append(time.perf_counter() - t0)
    print(f"score_tree() in-process:    wall {min(inproc):.3f} s (no interpreter start-up)")
    print(f"scores equal to 1e-6 min:   {'yes' if not mismatches else 'NO ' + repr(mismatches)}")
    print(
        f"speed ratio (official / ours): wall {best_off[0] / best_ours[0]:.1f}x, cpu {best_off[1] / best_ours[1]:.1f}x"
        " (goal >= 20x)"
    )
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
