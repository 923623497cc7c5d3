"""Fit the planner's constants and write them into harness/planner/data/.

    python bench/fit_planner.py                     # fit on every published row, print (in-sample)
    python bench/fit_planner.py --write             # ... and store them in data/efficiency.yaml
    python bench/fit_planner.py --import-fixture DIR  # regenerate data/published.yaml from DIR:
                                                    # scores.csv + systems/ of the published
                                                    # v3.0-v4.0 results (see fitting.import_fixture)
    python bench/fit_planner.py --import-fixture DIR --next   # ... data/published_v4.1.yaml instead
                                                    # (fitted too; forward.py predicts it from v3.0-v4.0)
    python bench/fit_planner.py --harness RUN_DIR... [--write]
                                                    # the mlperf-harness CPU constants from our runs

The fit's own error is in-sample (labelled so); bench/bench_planner_accuracy.py gives the held-out
errors the planner reports.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from harness.planner import calibration as C  # noqa: E402
from harness.planner import fitting as F  # noqa: E402
from harness.planner import search as SE  # noqa: E402
from harness.planner.hardware import DATA  # noqa: E402

# Starting values (and the pull) of the mlperf-harness CPU fit, from first principles: a 2-core
# x86 host, one thread per rank, gloo over loopback. Collectives: ~0.3 ms per call on a quiet host;
# 1-process runs never call one, so this stays a first-principles value unless the fit is given
# multi-process runs made on a quiet machine.
START_CPU = {
    "mfu": 0.5,
    "microbatch_overhead_s": 0.005,
    "step_overhead_s": 0.005,
    "eval_overhead_s": 0.05,
    "data_s_per_sample": 0.0002,
    "coll_latency_s": 0.0003,
    "checkpoint_s": 0.2,
}
KEYS = (
    "mfu",
    "step_overhead_s",
    "dp_overlap",
    "eval_overhead_s",
    "tp_exposed_no_overlap",
    "gather_eff",
    "family",
)


def _flow(v) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_flow(x)}" for k, x in v.items()) + "}"
    return f"{v:.6g}" if isinstance(v, float) else str(v)


NEXT_HEAD = """# The published MLPerf Training results of gpt3, llama2_70b_lora, gnn and stable_diffusion of the
# round after data/published.yaml's (v4.1, closed division), in its format. The constants are fitted
# on both tables; bench/bench_planner_accuracy.py (harness/planner/forward.py) predicts this round
# from the constants fitted on the earlier rounds only.
# Generated from the published results of MLCommons' training_results_v4.1 (scores.csv of the
# official result summarizer + each row's system-description JSON) by
# `python bench/fit_planner.py --import-fixture DIR --next`.
"""


def write_published(rows: list[dict], name: str = "published.yaml") -> None:
    path = DATA / name
    text = path.read_text() if path.exists() else NEXT_HEAD + "\n- "
    head = text[: text.index("\n- ") + 1]
    path.write_text(head + "".join("- " + json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def write_fit(k: dict, rows, med: float, p90: float) -> None:
    """Replace the blocks from `fitted:` to `harness:`, keeping the header and the fixed block."""
    path = DATA / "efficiency.yaml"
    text = path.read_text()
    head, tail = text[: text.index("\nfitted:") + 1], text[text.index("\nharness:") + 1 :]
    lines = ["fitted:"] + [f"  {key}: {_flow(k[key])}" for key in KEYS]
    for table in F.STACK_TABLES:
        lines.append(f"  {table}:")
        lines += [f"    {key}: {_flow(v)}" for key, v in sorted(k[table].items())]
    lines.append("fitted_on:   # constant -> the published rows (data/published.yaml ids) it was fitted on")
    for key, ids in F.fitted_on(rows, k).items():
        lines.append(f"  {key}:")
        lines += [f"    - {i}" for i in ids]
    lines.append(
        f"in_sample_error: {{median_ape: {med:.2f}, p90_ape: {p90:.2f}, rows: {len(rows)}}}  # not held out"
    )
    path.write_text(head + "\n".join(lines) + "\n" + tail)
    C.efficiency_file.cache_clear()


HARNESS_NOTE = (
    "# harness.gpu: assumptions (no GPU runs calibrated yet; compute efficiency falls back to the\n"
    "# published nvidia-ngc@24.04 fit). harness.cpu: fitted by bench/fit_planner.py --harness on the\n"
    "# 1-process runs in harness_fitted_on (a shared, busy 2-core host: its speed is folded in);\n"
    "# coll_latency_s keeps the first-principles value of START_CPU (bench/fit_planner.py).\n"
)


def write_harness(group: str, consts: dict, runs: list[str]) -> None:
    path = DATA / "efficiency.yaml"
    text = path.read_text()
    d = yaml.safe_load(text)
    cut = text.index(HARNESS_NOTE[:20]) if HARNESS_NOTE[:20] in text else text.index("\nharness:") + 1
    d["harness"][group] = consts
    d.setdefault("harness_fitted_on", {})[group] = runs
    body = yaml.safe_dump(
        {"harness": d["harness"], "harness_fitted_on": d["harness_fitted_on"]}, sort_keys=False
    )
    path.write_text(text[:cut] + HARNESS_NOTE + body)
    C.efficiency_file.cache_clear()


def fit_harness(run_dirs: list[str], write: bool) -> int:
    import benchmarks
    from harness.planner import hardware, selfcal
    from harness.planner import stacks as S
    from harness.resolve import systems

    by_bench: dict = {}
    for d in run_dirs:
        plan = json.loads((Path(d) / "plan.json").read_text())
        by_bench.setdefault((plan["benchmark"], plan["submission"]["system"]), []).append(d)
    consts: dict = {}
    described = []
    for (bench, system), dirs in by_bench.items():
        hw = hardware.from_spec(systems.load(system))
        runs = [selfcal.read_run(d, benchmarks.get(bench), hw) for d in dirs]
        prior, _ = C.for_prediction(bench, hw, S.make("mlperf-harness"))
        start = {
            key: ({**prior[key], bench: v} if isinstance(prior.get(key), dict) else v)
            for key, v in START_CPU.items()
        }
        k = selfcal.fit_runs(runs, benchmarks.get(bench), {**prior, **start, "time_scale": 1.0})
        for run in runs:
            p = selfcal.predicted(run, k)
            described.append(f"{bench} {run.plan.layout.describe()} (step {run.step_s:.4f} s)")
            print(
                f"{bench:8s} {run.plan.layout.describe():80s} step {run.step_s:.4f} fit {p['step_s']:.4f}"
                f"  eval {run.eval_s or 0:.3f} fit {p['eval_s']:.3f}"
            )
        scale = k["time_scale"]
        for key, per, _ in selfcal.FREE:
            if key == "time_scale":
                continue
            v = k[key][bench] if per else k[key]
            # fold this machine's speed into the constants: shipped time_scale stays 1
            v = v / scale if key == "mfu" else v * scale
            if per:
                consts.setdefault(key, {})[bench] = round(float(v), 8)
            else:
                consts[key] = round(float(v), 8)
    print(yaml.safe_dump(consts, sort_keys=False))
    if write:
        base = C.efficiency_file()["harness"]["cpu"]
        merged = {
            **base,
            **{k: ({**base.get(k, {}), **v} if isinstance(v, dict) else v) for k, v in consts.items()},
        }
        write_harness("cpu", {**merged, "time_scale": 1.0}, described)
        print(f"wrote {DATA / 'efficiency.yaml'} (harness.cpu)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="store the result in harness/planner/data/")
    ap.add_argument("--import-fixture", metavar="DIR", help="regenerate data/published.yaml from the fixture")
    ap.add_argument("--next", action="store_true", help="with --import-fixture: write the next-round table")
    ap.add_argument("--harness", nargs="+", metavar="RUN_DIR", help="fit the mlperf-harness CPU constants")
    args = ap.parse_args(argv)
    if args.import_fixture:
        rows = F.import_fixture(args.import_fixture)
        name = C.NEXT_ROUND if args.next else "published.yaml"
        write_published(rows, name)
        print(f"wrote {len(rows)} rows to {DATA / name}")
        return 0
    if args.harness:
        return fit_harness(args.harness, args.write)
    rows = list(C.published())
    k = F.fit(rows)
    print("constants (fitted):")
    for key in KEYS + F.STACK_TABLES:
        print(f"  {key}: {_flow(k[key])}")
    errs = []
    print(f"\n{'row':62s} {'published':>9s} {'predicted':>9s} {'APE %':>6s}")
    for r in rows:
        p = SE.predict(r, k)
        errs.append(F.ape(p, r.score_min))
        print(f"{r.id[:62]:62s} {r.score_min:9.3f} {p:9.3f} {errs[-1]:6.1f}")
    med, p90 = F.summary(errs)
    print(
        f"\nIN-SAMPLE (fitted on these rows) error: median {med:.1f} %, p90 {p90:.1f} % over {len(errs)} rows"
    )
    if args.write:
        write_fit(k, rows, med, p90)
        print(f"wrote {DATA / 'efficiency.yaml'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
