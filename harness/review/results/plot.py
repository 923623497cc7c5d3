"""Time-to-train against accelerator count (log-log) for `mlperf results compare --plot FILE.png`.

One line per (round, submitter), points at each scale (best score at that scale), each line
labelled at its right end with "<round> <submitter>" so no legend lookup is needed; colour
by round, marker by submitter. Headless (Agg backend), deterministic output.
"""

from __future__ import annotations

import os


def plot(df, benchmark: str, path: str, accelerator: str | None = None) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    sel = df[(df["benchmark"] == benchmark) & df["score_min"].notna() & df["accelerators"].notna()]
    if accelerator:
        sel = sel[sel["accelerator"].fillna("").str.contains(accelerator, case=False, regex=False)]
    rounds = sorted(
        sel["round"].unique(), key=lambda r: tuple(int(x) for x in r.lstrip("v").split(".") if x.isdigit())
    )
    cmap = plt.get_cmap("viridis", max(len(rounds), 2))
    markers = "osD^v<>phX*"
    submitters = sorted(sel["submitter"].fillna("?").unique())
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    for i, r in enumerate(rounds):
        for s in submitters:
            d = sel[(sel["round"] == r) & (sel["submitter"].fillna("?") == s)]
            if d.empty:
                continue
            best = d.groupby("accelerators")["score_min"].min().sort_index()
            x, y = best.index.astype(float).tolist(), best.values.tolist()
            color = cmap(i)
            ax.plot(x, y, marker=markers[submitters.index(s) % len(markers)], color=color, linewidth=1.5)
            ax.annotate(
                f"{r} {s}",
                (x[-1], y[-1]),
                xytext=(6, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
                color=color,
            )
            for xi, yi in zip(x, y):
                ax.annotate(
                    f"{yi:.3g}",
                    (xi, yi),
                    xytext=(0, -11),
                    textcoords="offset points",
                    ha="center",
                    fontsize=6,
                    color="0.35",
                )
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = matplotlib.ticker.FuncFormatter(lambda v, _p: f"{v:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("accelerators")
    ax.set_ylabel("time to train (minutes, score)")
    title = f"MLPerf Training {benchmark}" + (f" on {accelerator}" if accelerator else "")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.25)
    ax.margins(x=0.25)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp.png"
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, path)
    return path
