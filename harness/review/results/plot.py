"""Time to train against accelerator count (log-log) for `mlperf results compare --plot FILE.png`.

Readable with 60 results a round: one panel per round (shared axes), in each
- every result as a small dot in its accelerator's colour;
- each system family (one submitter, one accelerator model) that ran at several scales as a thin
  line in its accelerator's colour: a line never joins different accelerators or submitters;
- the round's best-per-scale frontier as large markers (accelerator colour, black edge), each
  named by its submitter, the only names on the plot; accelerators are named in one legend;
- the best of all earlier rounds at each scale as hollow grey markers, to see the progress.
Headless (Agg backend), deterministic output, written atomically.
"""

from __future__ import annotations

import os

from harness.review.results.compare import round_key, select, short_accelerator


def frontier(d):
    """[(accelerators, score, submitter, accelerator)] best at each scale, by scale."""
    best = d.loc[d.groupby("accelerators")["score_min"].idxmin()].sort_values("accelerators")
    return list(zip(best["accelerators"].astype(float), best["score_min"], best["submitter"], best["acc"]))


def plot(df, benchmark: str, path: str, accelerator: str | None = None) -> str:
    """Write the figure to `path` (PNG, atomically); returns the path."""
    import matplotlib.pyplot as plt

    fig = figure(df, benchmark, accelerator)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp.png"
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, path)
    return path


def figure(df, benchmark: str, accelerator: str | None = None):
    """The matplotlib Figure (one axes per round)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    import pandas as pd

    sel, names = select(df, benchmark, accelerator)
    sel = sel[sel["accelerators"].notna()].assign(acc=lambda x: x["accelerator"].map(short_accelerator))
    rounds = sorted(sel["round"].unique(), key=round_key)
    accs = sorted(sel["acc"].unique())
    cmap = plt.get_cmap("tab10" if len(accs) <= 10 else "tab20")
    color = {a: cmap(i % cmap.N) for i, a in enumerate(accs)}
    n = max(len(rounds), 1)
    width = 3.6 * n + 2.3  # the legend takes the last 2.3 inches
    fig, axes = plt.subplots(1, n, figsize=(width, 4.6), dpi=100, sharex=True, sharey=True, squeeze=False)
    earlier = sel.iloc[0:0]
    for ax, r in zip(axes[0], rounds):
        d = sel[sel["round"] == r]
        ax.scatter(
            d["accelerators"],
            d["score_min"],
            s=10,
            c=[color[a] for a in d["acc"]],
            alpha=0.45,
            zorder=1,
            linewidths=0,
        )
        for (_sub, acc), fam in d.groupby(["submitter", "acc"]):
            best = fam.groupby("accelerators")["score_min"].min().sort_index()
            if len(best) > 1:
                ax.plot(best.index.astype(float), best.values, color=color[acc], lw=0.9, alpha=0.55, zorder=2)
        if len(earlier):
            prev = frontier(earlier)
            ax.scatter(
                [p[0] for p in prev],
                [p[1] for p in prev],
                s=30,
                facecolors="none",
                edgecolors="0.45",
                zorder=3,
            )
        earlier = pd.concat([earlier, d])
        front = frontier(d)
        for i, (x, y, sub, acc) in enumerate(front):
            ax.scatter([x], [y], s=46, color=color[acc], edgecolors="black", linewidths=0.7, zorder=4)
            # neighbouring scales alternate above/below, so their names do not run into each other
            up = i % 2 == 0
            ax.annotate(
                str(sub)[:14],
                (x, y),
                xytext=(4, 4) if up else (4, -5),
                textcoords="offset points",
                fontsize=6.5,
                rotation=35 if up else -35,
                va="bottom" if up else "top",
                zorder=5,
            )
        ax.set_title(f"{r} ({'/'.join(sorted(d['benchmark'].unique()))}, {len(d)} results)", fontsize=9)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, which="major", alpha=0.25)
        ax.set_xlabel("accelerators")
    plain = matplotlib.ticker.FuncFormatter(lambda v, _p: f"{v:g}")
    for axis in (axes[0][0].xaxis, axes[0][0].yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes[0][0].set_ylabel("time to train (minutes)")
    handles = [plt.Line2D([], [], color=color[a], marker="o", lw=1, label=a) for a in accs]
    handles += [
        plt.Line2D([], [], color="0.6", marker="o", lw=0, markersize=4, alpha=0.5, label="a result"),
        plt.Line2D(
            [],
            [],
            color="white",
            marker="o",
            markeredgecolor="black",
            lw=0,
            label="the round's best at its scale",
        ),
        plt.Line2D(
            [], [], color="white", marker="o", markeredgecolor="0.45", lw=0, label="best of earlier rounds"
        ),
    ]
    fig.legend(handles=handles, loc="center right", fontsize=7.5, frameon=False)
    title = f"MLPerf Training {'/'.join(names)}" + (f" on {accelerator}" if accelerator else "")
    fig.suptitle(title + ": lines join one submitter's results on one accelerator", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1 - 2.3 / width, 1))
    return fig
