"""`mlperf results compare`: round-over-round analysis of ingested results.

Per round, for one benchmark (optionally one accelerator family, matched by substring of the
system JSON's `accelerator_model_name`, e.g. `H100`):
- best score and the result that set it;
- score at a matched scale: the best score at the largest accelerator count present in every
  compared round (or `--scale N`);
- per-accelerator-normalised time: score × accelerators (accelerator-minutes), best of the round;
- scaling efficiency between the smallest and the largest scale of the round:
  (score_small × n_small) / (score_large × n_large), 1.0 = perfect strong scaling;
- speedup over the previous round, of the best score and at the matched scale.
"""

from __future__ import annotations

from harness.core.errors import ConfigError


def _round_key(r: str) -> tuple:
    try:
        return tuple(int(x) for x in r.lstrip("v").split("."))
    except ValueError:
        return (999, r)


def _pick(df, col="score_min"):
    row = df.loc[df[col].idxmin()]
    return row


def compare(df, benchmark: str, accelerator: str | None = None, scale: int | None = None) -> dict:
    sel = df[(df["benchmark"] == benchmark) & df["score_min"].notna()]
    if accelerator:
        sel = sel[sel["accelerator"].fillna("").str.contains(accelerator, case=False, regex=False)]
    if sel.empty:
        what = f"{benchmark}" + (f" on {accelerator}" if accelerator else "")
        raise ConfigError(f"no scored results for {what} in the ingested rounds")
    rounds = sorted(sel["round"].unique(), key=_round_key)
    if scale is None:
        common = None
        for r in rounds:
            counts = set(sel[sel["round"] == r]["accelerators"].dropna().astype(int))
            common = counts if common is None else common & counts
        scale = max(common) if common else None
    out = []
    prev = None
    for r in rounds:
        d = sel[sel["round"] == r]
        best = _pick(d)
        row = {
            "round": r,
            "results": int(len(d)),
            "best_score_min": float(best["score_min"]),
            "best_submitter": best["submitter"],
            "best_system": best["system"],
            "best_accelerators": _int(best["accelerators"]),
            "matched_scale": scale,
            "matched_score_min": None,
            "matched_system": None,
            "best_accelerator_minutes": None,
            "best_accelerator_minutes_system": None,
            "scaling_efficiency": None,
            "scaling_from": None,
            "scaling_to": None,
            "speedup_best": None,
            "speedup_matched": None,
        }
        if scale is not None:
            m = d[d["accelerators"] == scale]
            if not m.empty:
                mb = _pick(m)
                row["matched_score_min"] = float(mb["score_min"])
                row["matched_system"] = mb["system"]
        am = d[d["accelerators"].notna()]
        if not am.empty:
            am = am.assign(_am=am["score_min"] * am["accelerators"])
            ab = am.loc[am["_am"].idxmin()]
            row["best_accelerator_minutes"] = float(ab["_am"])
            row["best_accelerator_minutes_system"] = ab["system"]
            # strong scaling within one accelerator model: the one of the largest-scale result
            top = am[am["accelerators"] == am["accelerators"].max()]
            same = am[am["accelerator"] == _pick(top)["accelerator"]]
            scales = sorted(set(same["accelerators"].astype(int)))
            if len(scales) >= 2:
                lo = _pick(same[same["accelerators"] == scales[0]])
                hi = _pick(same[same["accelerators"] == scales[-1]])
                row["scaling_efficiency"] = float(
                    (lo["score_min"] * scales[0]) / (hi["score_min"] * scales[-1])
                )
                row["scaling_from"], row["scaling_to"] = scales[0], scales[-1]
        if prev is not None:
            row["speedup_best"] = prev["best_score_min"] / row["best_score_min"]
            if prev["matched_score_min"] and row["matched_score_min"]:
                row["speedup_matched"] = prev["matched_score_min"] / row["matched_score_min"]
        out.append(row)
        prev = row
    return {"benchmark": benchmark, "accelerator": accelerator, "matched_scale": scale, "rounds": out}


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None
