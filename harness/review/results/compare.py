"""`mlperf results compare`: round-over-round analysis of ingested results.

A benchmark is followed across its renames (rules.linked: gnn in v4.x is rgat in v5.x, ssd is
retinanet). Per round, for that benchmark (optionally one accelerator family, matched by
substring of the system JSON's `accelerator_model_name`, e.g. `H100`), ranked by time to train
or, with `by="energy"`, by energy to train (rounds and results with power logs):
- best result and who set it;
- at a matched scale: the best at the largest accelerator count present in every compared round
  (or `scale`);
- per accelerator: score x accelerators (accelerator-minutes) or energy / accelerators, the best;
- scaling efficiency within the accelerator model of the round's largest result, between its
  smallest and largest scale: (t_small x n_small) / (t_large x n_large), 1.0 = perfect;
- best energy (J) and energy per accelerator where the round has power results;
- speedup over the previous round, like for like only (the same accelerator, by its short name,
  at the same count): of the best, and at the matched scale, where the two rounds' results are
  alike; otherwise no number and `*_unlike` names both ('1024 H100 vs 8 B200': a 0.15x between
  a 1,024-GPU and an 8-GPU result measures the scale, not the round); `speedup_like` is the
  speedup of the fastest (accelerator, count) present in both rounds, named.
A result published twice in a round (the same runs under two system names or submitter folders:
`duplicates`) is counted once, and named in the document's `duplicates`.
"""

from __future__ import annotations

import numbers

from harness.core import rulesets as rules
from harness.core.errors import ConfigError
from harness.core.plot_style import short_accelerator  # here too: its importers know it here

METRICS = {"time": "score_min", "energy": "energy_j"}


def result_name(row) -> str:
    return f"{row.get('submitter') or '-'}/{row.get('system')}/{row.get('benchmark')}"


def _ids(row) -> set:
    ids = row.get("run_ids")
    if isinstance(ids, str):  # the database keeps them as one ';'-joined string
        ids = ids.split(";")
    return {i for i in ids if i} if isinstance(ids, (list, tuple)) else set()  # NaN: an older database


def duplicates(rows: list[dict]) -> list[dict]:
    """Results that are one result published twice: folders of a benchmark sharing a run (the same
    run_start and run_stop to the millisecond, `run_ids`; independent runs never do), e.g. a
    partner's folder holding copies of the logs of NVIDIA's. Per group, one is kept (`_original`);
    one entry {kept, dropped (row indices), shared, runs} for every other. Rows without run_ids
    (a database ingested before they were stored) are never duplicates."""
    ids = [_ids(r) for r in rows]
    group = list(range(len(rows)))

    def top(i: int) -> int:
        while group[i] != i:
            i = group[i]
        return i

    first: dict = {}
    for i, r in enumerate(rows):
        for run in ids[i]:
            j = first.setdefault((r.get("benchmark"), run), i)
            group[top(i)] = top(j)
    members: dict = {}
    for i in range(len(rows)):
        members.setdefault(top(i), []).append(i)
    out = []
    for m in members.values():
        if len(m) < 2:
            continue
        kept = min(m, key=lambda i: _original(rows[i]))
        for i in sorted(m):
            if i != kept:
                out.append(
                    {"kept": kept, "dropped": i, "shared": len(ids[i] & ids[kept]), "runs": len(ids[i])}
                )
    return out


def _original(row) -> tuple:
    """Sort key of the copies of a result, the original first: the folder of the submitter its
    logs name, then one without problems, with the most counted runs, then by name."""
    own = bool(row.get("submitter")) and row.get("submitter") == row.get("submission_org")
    counted = row.get("runs_scored")  # a database row; a score row has run_minutes
    if not isinstance(counted, numbers.Real) or counted != counted:  # numpy's int64 is a Real
        counted = sum(m is not None for m in row.get("run_minutes") or [])
    return (not own, bool(row.get("problems")), -counted, str(row.get("submitter")), str(row.get("system")))


def dedupe(df) -> tuple:
    """(df without the second copies of results published twice, one dict each naming both)."""
    drop, said = [], []
    for r in sorted(df["round"].unique(), key=round_key) if "round" in df.columns else []:
        d = df[df["round"] == r]
        recs = d.to_dict("records")
        for dup in duplicates(recs):
            kept, gone = recs[dup["kept"]], recs[dup["dropped"]]
            drop.append(d.index[dup["dropped"]])
            said.append(
                {
                    "round": r,
                    "kept": result_name(kept),
                    "dropped": result_name(gone),
                    "shared_runs": dup["shared"],
                    "runs": dup["runs"],
                }
            )
    return df.drop(index=drop), said


def round_key(r: str) -> tuple:
    try:
        return tuple(int(x) for x in r.lstrip("v").split("."))
    except ValueError:
        return (999, r)


def select(df, benchmark: str, accelerator: str | None = None, metric: str = "score_min"):
    """Rows of the benchmark under any of its names with a value of `metric`."""
    names = rules.linked(benchmark) if benchmark in rules.all_benchmarks() else [benchmark]
    sel = df[df["benchmark"].isin(names) & df[metric].notna()]
    if accelerator:
        sel = sel[sel["accelerator"].fillna("").str.contains(accelerator, case=False, regex=False)]
    return sel, names


def _best(df, col):
    return df.loc[df[col].astype(float).idxmin()]


def _opt(v):
    return None if v is None or v != v else float(v)  # NaN -> None


def compare(
    df, benchmark: str, accelerator: str | None = None, scale: int | None = None, by: str = "time"
) -> dict:
    metric = METRICS[by]
    if metric not in df.columns:
        raise ConfigError(f"the database has no {by} column: re-ingest the rounds with this version")
    sel, names = select(df, benchmark, accelerator, metric)
    sel, dups = dedupe(sel)
    if sel.empty:
        what = "/".join(names) + (f" on {accelerator}" if accelerator else "")
        raise ConfigError(f"no results with a {by} score for {what} in the ingested rounds")
    rounds = sorted(sel["round"].unique(), key=round_key)
    if scale is None:
        common = None
        for r in rounds:
            counts = set(sel[sel["round"] == r]["accelerators"].dropna().astype(int))
            common = counts if common is None else common & counts
        scale = max(common) if common else None
    out, prev = [], None
    for r in rounds:
        d = sel[sel["round"] == r]
        best = _best(d, metric)
        row = {
            "round": r,
            "benchmark": str(best["benchmark"]),
            "ruleset": best.get("ruleset"),
            "results": int(len(d)),
            "by": by,
            "best": float(best[metric]),
            "best_score_min": _opt(best["score_min"]),
            "best_energy_j": _opt(best.get("energy_j")),
            "best_submitter": best["submitter"],
            "best_system": best["system"],
            "best_accelerator": best["accelerator"],
            "best_accelerators": _int(best["accelerators"]),
            "matched_scale": scale,
            "matched": None,
            "matched_system": None,
            "matched_accelerator": None,
            "best_per_accelerator": None,
            "best_per_accelerator_system": None,
            "scaling_efficiency": None,
            "scaling_from": None,
            "scaling_to": None,
            "speedup_best": None,
            "speedup_best_unlike": None,
            "speedup_matched": None,
            "speedup_matched_unlike": None,
            "speedup_like": None,
        }
        if scale is not None:
            m = d[d["accelerators"] == scale]
            if not m.empty:
                mb = _best(m, metric)
                row["matched"], row["matched_system"] = float(mb[metric]), mb["system"]
                row["matched_accelerator"] = mb["accelerator"]
        am = d[d["accelerators"].notna()]
        if not am.empty:
            n = am["accelerators"].astype(float)
            # time: accelerator-minutes (time x n); energy: joules per accelerator (E / n)
            am = am.assign(
                _per=am[metric].astype(float) * n if by == "time" else am[metric].astype(float) / n
            )
            ab = am.loc[am["_per"].idxmin()]
            row["best_per_accelerator"], row["best_per_accelerator_system"] = float(ab["_per"]), ab["system"]
            if by == "time":
                _scaling(row, am, metric)
        if prev is not None:
            was, now = (
                _kind(prev["best_accelerator"], prev["best_accelerators"]),
                _kind(best["accelerator"], best["accelerators"]),
            )
            row["speedup_best"], row["speedup_best_unlike"] = _speedup(prev["best"], row["best"], was, now)
            if prev["matched"] and row["matched"]:
                was, now = _kind(prev["matched_accelerator"], scale), _kind(row["matched_accelerator"], scale)
                row["speedup_matched"], row["speedup_matched_unlike"] = _speedup(
                    prev["matched"], row["matched"], was, now
                )
            row["speedup_like"] = _like(sel[sel["round"] == prev["round"]], d, metric)
        out.append(row)
        prev = row
    return {
        "benchmark": benchmark,
        "names": names,
        "accelerator": accelerator,
        "by": by,
        "matched_scale": scale,
        "rounds": out,
        "duplicates": dups,
    }


def _kind(accelerator, n) -> tuple:
    """What a speedup must hold equal: the accelerator (short name: 'H100' whatever the JSON's
    spelling) and the accelerator count."""
    return (short_accelerator(accelerator), _int(n))


def _speedup(was: float, now: float, kind_was: tuple, kind_now: tuple) -> tuple:
    """(was / now, None) for results alike, else (None, 'N ACC vs N ACC') naming both."""
    if kind_was == kind_now:
        return was / now, None
    return None, f"{kind_was[1] or '?'} {kind_was[0]} vs {kind_now[1] or '?'} {kind_now[0]}"


def _like(before, now, metric: str) -> dict | None:
    """The speedup at the (accelerator, count) present in both rounds where this round is
    fastest: {speedup, accelerator, accelerators}, or None when the rounds share none."""
    if before.empty or now.empty:
        return None

    def bests(d):
        d = d[d["accelerators"].notna()]
        keys = [_kind(a, n) for a, n in zip(d["accelerator"], d["accelerators"])]
        return d.assign(_k=keys).groupby("_k")[metric].min()

    was, is_ = bests(before), bests(now)
    common = [k for k in is_.index if k in was.index]
    if not common:
        return None
    k = min(common, key=lambda k: is_[k])
    return {"speedup": float(was[k] / is_[k]), "accelerator": k[0], "accelerators": k[1]}


def _scaling(row: dict, am, metric: str) -> None:
    """Strong scaling within the accelerator model of the round's largest result."""
    top = am[am["accelerators"] == am["accelerators"].max()]
    same = am[am["accelerator"] == _best(top, metric)["accelerator"]]
    scales = sorted(set(same["accelerators"].astype(int)))
    if len(scales) < 2:
        return
    lo = _best(same[same["accelerators"] == scales[0]], metric)
    hi = _best(same[same["accelerators"] == scales[-1]], metric)
    row["scaling_efficiency"] = float((lo[metric] * scales[0]) / (hi[metric] * scales[-1]))
    row["scaling_from"], row["scaling_to"] = scales[0], scales[-1]


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None
