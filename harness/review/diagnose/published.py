"""What any MLPerf log says about its own speed (no timings.jsonl needed), and how it compares
with the best published result of the same benchmark on the same accelerator.

profile(): from the MLLOG events between run_start and run_stop
- block (or epoch) intervals: count and median length;
- evaluations: count, median length, share of the time to train spent evaluating, samples
  trained between evaluations (samples_count, else epoch_num) and `eval_samples`;
- `tracked_stats` throughput as the log reports it (median, spread; the unit is the submitter's);
- end-to-end progress per second: progress at the last evaluation / (its time - run_start), the
  figure `results ingest` stores per result (`progress_per_s`), so the two compare one to one.

Detectors (each a Finding or None):
- eval_overhead: evaluation takes > EVAL_SHARE of the time to train (full-size logs; a tiny
  run's share above it is a note: tiny runs evaluate a tiny model often by design);
- slow_vs_published: progress per second per accelerator < SLOW_RATIO x the best published result
  of the benchmark (any of its names) on the same accelerator model, from an ingested database.
"""

from __future__ import annotations

import statistics

from harness.review.diagnose.detectors import Finding, _r
from harness.review.diagnose.inputs import RunData

# Evaluation above 15 % of run_start..run_stop is named. Why 15 %: the best published results
# spend 2-11 % there (tests/data rounds: llama31_405b 2 %, llama31_8b 2 %, rgat 8 %, llama2_70b_lora
# 11 %, the evaluation the rules prescribe), so above 15 % is evaluation slower or more frequent
# than a good submission needs; the 25 % this was before let a run at 24 % pass (issue 47).
EVAL_SHARE = 0.15
SLOW_RATIO = 0.5
_PROGRESS = ("samples_count", "epoch_num")


def _num(x):
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _intervals(events: list, start: str, stop: str) -> list[float]:
    """Seconds between each `start` and the next `stop`."""
    out, t0 = [], None
    for e in events:
        if e["key"] == start:
            t0 = e["time_ms"]
        elif e["key"] == stop and t0 is not None:
            out.append((e["time_ms"] - t0) / 1000)
            t0 = None
    return out


def _progress(md) -> tuple[float, str] | None:
    for unit in _PROGRESS:
        v = _num((md or {}).get(unit)) if isinstance(md, dict) else None
        if v is not None:
            return v, unit
    return None


def timed_events(run: RunData) -> list:
    """Events from run_start to run_stop (both included), in file order."""
    out, on = [], False
    for e in run.events:
        on = on or e["key"] == "run_start"
        if on:
            out.append(e)
        if e["key"] == "run_stop":
            break
    return out


def profile(run: RunData) -> dict:
    ev = timed_events(run)
    if not ev or ev[0]["key"] != "run_start":
        return {}
    t0 = ev[0]["time_ms"]
    end = ev[-1]["time_ms"] if ev[-1]["key"] == "run_stop" else None
    out: dict = {"time_to_train_min": None if end is None else _r((end - t0) / 60000)}
    for kind in ("block", "epoch"):
        iv = _intervals(ev, f"{kind}_start", f"{kind}_stop")
        if iv:
            out[f"{kind}s"] = len(iv)
            out[f"median_{kind}_s"] = _r(statistics.median(iv))
    evals = _intervals(ev, "eval_start", "eval_stop")
    if evals:
        out["evals"] = len(evals)
        out["median_eval_s"] = _r(statistics.median(evals))
        if end is not None and end > t0:
            out["eval_share"] = round(sum(evals) / ((end - t0) / 1000), 4)
            out["eval_total_s"] = _r(sum(evals))
    acc = [(e["time_ms"], _progress(e.get("metadata"))) for e in ev if e["key"] == "eval_accuracy"]
    acc = [(t, p) for t, p in acc if p]
    if acc:
        steps = [b[1][0] - a[1][0] for a, b in zip(acc, acc[1:])]
        out["progress_unit"] = acc[-1][1][1]
        if steps:
            out[f"median_{out['progress_unit']}_between_evals"] = _r(statistics.median(steps))
        dt = (acc[-1][0] - t0) / 1000
        if dt > 0:
            out["progress_per_s"] = _r(acc[-1][1][0] / dt)
    if run.first("eval_samples") is not None:
        out["eval_samples"] = run.first("eval_samples")
    tput = [
        _num((e.get("value") or {}).get("throughput"))
        for e in run.events
        if e["key"] == "tracked_stats" and isinstance(e.get("value"), dict)
    ]
    tput = [t for t in tput if t is not None]
    if tput:
        out["tracked_throughput_median"] = _r(statistics.median(tput))
        out["tracked_throughput_min"], out["tracked_throughput_max"] = _r(min(tput)), _r(max(tput))
    if run.accelerators:
        out["accelerators"] = run.accelerators
        if out.get("progress_per_s"):
            out["progress_per_s_per_acc"] = _r(out["progress_per_s"] / run.accelerators)
    if run.accelerator:
        out["accelerator"] = run.accelerator
    return out


def eval_overhead(run: RunData, prof: dict) -> Finding | None:
    share = prof.get("eval_share")
    if share is None or share <= EVAL_SHARE:
        return None
    said = (
        f"{prof['evals']} evaluations take {prof['eval_total_s']:g} s of the {prof['time_to_train_min'] * 60:.4g} s "
        f"from run_start to run_stop ({share:.0%}, above {EVAL_SHARE:.0%})"
    )
    if run.first("harness_size") == "tiny":
        # tiny runs evaluate a tiny model often by design: said, but not a finding about speed
        run.notes.append(f"{said}: tiny size evaluates often by design; at full size this is a finding")
        return None
    ev = {
        k: prof[k]
        for k in ("evals", "median_eval_s", "eval_total_s", "eval_share", "time_to_train_min")
        if k in prof
    }
    ev["run_s"] = _r(prof["time_to_train_min"] * 60)
    ev["threshold_share"] = EVAL_SHARE
    return Finding(
        id="eval_overhead",
        symptom="evaluation takes a large share of the time to train",
        cause="evaluation is slow or too frequent for this scale",
        evidence=ev,
        summary=f"{said}; median evaluation {prof['median_eval_s']} s",
        remedy=[
            "evaluate on every accelerator (distributed evaluation) and overlap it with training where the rules allow",
            "keep the evaluation interval the rules prescribe: more frequent evaluations than required only cost time",
        ],
    )


def slow_vs_published(run: RunData, prof: dict, db) -> Finding | None:
    """`db` is the ingested results table (pandas); None skips the comparison."""
    mine = prof.get("progress_per_s_per_acc")
    if db is None or mine is None or not run.accelerator or not run.benchmark:
        return None
    from harness.core import rulesets as rules
    from harness.review.results.compare import short_accelerator

    names = rules.linked(run.benchmark) if run.benchmark in rules.all_benchmarks() else [run.benchmark]
    acc = short_accelerator(run.accelerator)
    if "progress_per_s_per_acc" not in db.columns:
        return None
    d = db[db["benchmark"].isin(names) & db["progress_per_s_per_acc"].notna()]
    d = d[
        (d["progress_unit"] == prof.get("progress_unit")) & (d["accelerator"].map(short_accelerator) == acc)
    ]
    if d.empty:
        return None
    best = d.loc[d["progress_per_s_per_acc"].astype(float).idxmax()]
    ratio = mine / float(best["progress_per_s_per_acc"])
    if ratio >= SLOW_RATIO:
        return None
    unit = prof["progress_unit"]
    evidence = {
        "this_run_per_acc": _r(mine),
        "best_published_per_acc": _r(float(best["progress_per_s_per_acc"])),
        "ratio": round(ratio, 3),
        "unit": f"{unit} per second per accelerator (run_start to the last evaluation)",
        "best_published": f"{best['round']} {best['submitter']}/{best['system']} ({int(best['accelerators'])} x "
        f"{best['accelerator']}, {best.get('framework') or '?'}), score {float(best['score_min']):.3f} min",
        "published_results_compared": int(len(d)),
    }
    return Finding(
        id="slow_vs_published",
        symptom=f"throughput per accelerator at {ratio:.0%} of the best published {acc} result",
        cause="the software stack or its configuration (framework, kernels, parallel layout, precision)",
        evidence=evidence,
        summary=f"{_r(mine)} vs {_r(float(best['progress_per_s_per_acc']))} {unit}/s per {acc}",
        remedy=[
            f"compare with the published implementation of {best['submitter']}/{best['system']} "
            f"({best.get('framework') or 'its framework'}): fused kernels, FP8/BF16, sequence packing, parallel layout",
            "check the time between evaluations first (median block/eval intervals above): slow steps or slow evals",
        ],
    )
