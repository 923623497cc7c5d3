"""Tables of `mlperf results compare` (rich)."""

from __future__ import annotations


def _fmt(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def _x(v):
    return "-" if v is None else f"{v:.2f}x"


def compare_table(doc: dict):
    from rich.table import Table

    energy = doc["by"] == "energy"
    names = "/".join(doc["names"])
    title = f"{names}" + (f" on {doc['accelerator']}" if doc["accelerator"] else "")
    title += " by round, ranked by " + ("energy to train" if energy else "time to train")
    t = Table(title=title, title_justify="left")
    ms = doc["matched_scale"]
    unit = "MJ" if energy else "min"
    cols = ["round", "benchmark", "ruleset", "results", f"best ({unit})", "best system", "n"]
    cols += [f"at {ms or '-'} acc. ({unit})", "kJ per acc." if energy else "best acc.-min"]
    cols += [] if energy else ["scaling eff."]
    cols += ["time (min)" if energy else "energy (MJ)", "speedup", "speedup matched"]
    for c in cols:
        t.add_column(c, overflow="fold")
    scale = 1e-6 if energy else 1.0
    for r in doc["rounds"]:
        cells = [
            r["round"],
            r["benchmark"],
            str(r["ruleset"] or "-"),
            str(r["results"]),
            _fmt(r["best"] * scale),
            f"{r['best_submitter']}/{r['best_system']}",
            str(r["best_accelerators"] or "-"),
            _fmt(None if r["matched"] is None else r["matched"] * scale),
            _fmt(
                None
                if r["best_per_accelerator"] is None
                else r["best_per_accelerator"] * (1e-3 if energy else 1),
                1,
            ),
        ]
        if not energy:
            eff = r["scaling_efficiency"]
            cells.append("-" if eff is None else f"{eff:.2f} ({r['scaling_from']}->{r['scaling_to']})")
            cells.append(_fmt(None if r["best_energy_j"] is None else r["best_energy_j"] / 1e6))
        else:
            cells.append(_fmt(r["best_score_min"]))
        cells += [_x(r["speedup_best"]), _x(r["speedup_matched"])]
        t.add_row(*cells)
    return t
