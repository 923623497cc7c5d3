"""Score published results with `mlperf results score` and with the official result summarizer;
print both times, the ratios and every score that differs.

    python bench/bench_score.py [ROOT ...] [--repeat N]

ROOT (default: rounds/ of tests/data/fixtures.tar.xz, published folders of v4.1, v5.0 and v5.1,
unpacked into a temporary folder) is any folder
holding submitter folders (<Org>/systems + <Org>/results), e.g. a clone of MLCommons'
training_results_v5.0. Each <Org> is summarized by `python -m mlperf_logging.result_summarizer
<Org> training <ruleset> --csv` on a temporary copy (the summarizer rewrites scaling.json), with
the ruleset of its round folder (v5.0 -> 5.0.0, as `results score` infers it); the whole ROOT is
scored by `python -m harness.cli results score ROOT --json --no-runs`, once with the compliance
check (the default, official semantics) and once with --no-check. All are timed as child
processes (wall and CPU seconds; ours best of --repeat), scores (1e-6 min) and energies (1e-6
relative) are compared, and the ratios official / ours are printed (goals: >= 50x with
--no-check, > 1x with the check).
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def timed(cmd, cwd=None):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p


def orgs(tree: Path) -> list[Path]:
    found = [p for p in sorted(tree.rglob("systems")) if p.is_dir() and (p.parent / "results").is_dir()]
    return [p.parent for p in found]


def official(tree: Path):
    """(wall, cpu, {(org, system folder, benchmark): (score, energy)}, [crashed orgs]).

    Keyed by the system's folder, not its name: two folders may share one system_name (NVIDIA
    v5.1's theia_ngpu16 and theia_ngpu72 are both "Theia (1x NVIDIA GB300 NVL72)"), and a name key
    would let one folder's score overwrite the other's. The summarizer's row names the folder only
    in details_url (.../<submitter>/systems/<folder>.json)."""
    from harness.core.rulesets import resolve

    scores, wall, cpu, crashed = {}, 0.0, 0.0, []
    with tempfile.TemporaryDirectory(prefix="bench-score-") as tmp:
        for i, org in enumerate(orgs(tree)):
            ruleset = resolve(path=org)[0]
            dst = Path(tmp) / str(i) / org.name
            shutil.copytree(org, dst, symlinks=True)
            out = Path(tmp) / f"{i}.csv"
            cmd = [sys.executable, "-m", "mlperf_logging.result_summarizer", str(dst), "training", ruleset]
            w, c, p = timed([*cmd, "--csv", str(out)], cwd=tmp)
            wall, cpu = wall + w, cpu + c
            detailed = out.with_name(out.stem + "_detailed.csv")
            if p.returncode != 0 or not detailed.exists():
                crashed.append(
                    f"{org.relative_to(tree)} ({p.stderr.strip().splitlines()[-1][:160] if p.stderr.strip() else p.returncode})"
                )
                continue
            with open(detailed) as f:
                for row in csv.DictReader(f):
                    for k, v in row.items():
                        if k.endswith(":time_to_train") and v:
                            bench = k.split(":")[0]
                            energy = row.get(f"{bench}:Energy") or None
                            folder = row["details_url"].rsplit("/", 1)[-1].removesuffix(".json")
                            key = (str(org.relative_to(tree)), folder, bench)
                            scores[key] = (float(v), float(energy) if energy else None)
    return wall, cpu, scores, crashed


def ours(tree: Path, *extra):
    w, c, p = timed(
        [sys.executable, "-m", "harness.cli", "results", "score", str(tree), "--json", "--no-runs", *extra],
        cwd=ROOT,
    )
    if p.returncode != 0:
        sys.exit(f"mlperf results score failed ({p.returncode}): {p.stderr[-2000:]}")
    doc = json.loads(p.stdout)
    scores = {}
    for r in doc["results"]:
        org = str(Path(r["path"]).parents[2].relative_to(tree.resolve()))
        # r["system"] is the system folder (two folders may share one system_name)
        scores[(org, r["system"], r["benchmark"])] = (r["score_min"], r["energy_j"])
    return w, c, scores


def in_process(tree: Path, repeat: int) -> tuple[float, float]:
    """Best CPU seconds of score_tree() in this process, one worker, with and without the check."""
    from harness.review.results.score import score_tree

    score_tree(tree, with_runs=False, workers=1)  # warm: imports and the rule-file cache
    out = []
    for check in (True, False):
        best = None
        for _ in range(repeat):
            t0 = time.process_time()
            score_tree(tree, with_runs=False, check=check, workers=1)
            best = min(best or 1e9, time.process_time() - t0)
        out.append(best)
    return out[0], out[1]


def differences(off: dict, mine: dict) -> list:
    out = []
    for k, (score, energy) in off.items():
        m_score, m_energy = mine.get(k, (None, None))
        bad_t = m_score is None or abs(m_score - score) > 1e-6
        bad_e = (energy is None) != (m_energy is None) or (energy and abs(m_energy - energy) > 1e-6 * energy)
        if bad_t or bad_e:
            out.append((k, (score, energy), (m_score, m_energy)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="*", help="default: the published folders shipped in tests/data")
    ap.add_argument("--repeat", type=int, default=3, help="runs of ours (the official tool runs once)")
    args = ap.parse_args()
    status = 0
    if not args.roots:
        from fixtures import fixture_path

        args.roots = [str(fixture_path("rounds"))]
    for root in args.roots:
        tree = Path(root).resolve()
        n_files = sum(1 for p in tree.rglob("result_*.txt") if "power" not in p.parts)
        off_wall, off_cpu, off_scores, crashed = official(tree)
        checked = min((ours(tree) for _ in range(args.repeat)), key=lambda t: t[0])
        fast = min((ours(tree, "--no-check") for _ in range(args.repeat)), key=lambda t: t[0])
        diff_c, diff_f = differences(off_scores, checked[2]), differences(off_scores, fast[2])
        print(
            f"tree: {tree} ({n_files} result files, {len(off_scores)} official scores, {len(checked[2])} ours)"
        )
        print(f"official result_summarizer:     wall {off_wall:8.2f} s, cpu {off_cpu:8.2f} s")
        print(f"results score (compliance on):  wall {checked[0]:8.2f} s, cpu {checked[1]:8.2f} s")
        print(f"results score --no-check:       wall {fast[0]:8.2f} s, cpu {fast[1]:8.2f} s")
        for name, diff in (("check", diff_c), ("--no-check", diff_f)):
            print(f"scores and energies equal ({name}): {'yes' if not diff else 'NO'}")
            for d in diff[:20]:
                print(f"   {d[0]}: official {d[1]}, ours {d[2]}")
        for c in crashed:
            print(f"official summarizer crashed on {c}: ours scored it (see its warnings)")
        print(
            f"speed ratio official / ours: with the check wall {off_wall / checked[0]:.1f}x cpu {off_cpu / checked[1]:.1f}x"
            f" (goal > 1x); --no-check wall {off_wall / fast[0]:.1f}x cpu {off_cpu / fast[1]:.1f}x (goal >= 50x)"
        )
        inproc = in_process(tree, args.repeat)
        print(
            f"score_tree() in-process (no interpreter start-up, serial): check {inproc[0]:.3f} s cpu, "
            f"--no-check {inproc[1]:.3f} s cpu; official cpu / these: {off_cpu / inproc[0]:.1f}x, {off_cpu / inproc[1]:.1f}x"
        )
        status |= bool(diff_c)
    return status


if __name__ == "__main__":
    sys.exit(main())
