"""Time to train against accelerator count (log-log) for `mlperf results compare --plot FILE.png`.

Readable with 60 results a round: one panel per round (shared axes), in each
- every result as a small mark: its accelerator family's shape, its accelerator's colour (tab10;
  plot_style.py);
- each system family (one submitter, one accelerator model) that ran at several scales as a thin
  line in its accelerator's colour: a line never joins different accelerators or submitters;
- the round's best-per-scale frontier as large markers (black edge), each named by its
  submitter where the name fits without overlapping (the title counts those left off), the only
  names on the plot; accelerators are named in one legend, grouped by family;
- the best of all earlier rounds at each scale as hollow grey markers, to see the progress.
Headless (Agg backend), deterministic output, written atomically.
"""

from __future__ import annotations

import os

from harness.core.plot_style import place_labels, readable_log_axis, style
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
    fig.savefig(tmp, bbox_inches="tight", pad_inches=0.1)  # nothing cut at the figure's edge
    plt.close(fig)
    os.replace(tmp, path)
    return path


def figure(df, benchmark: str, accelerator: str | None = None):
    """The matplotlib Figure (one axes per round)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    sel, names = select(df, benchmark, accelerator)
    sel = sel[sel["accelerators"].notna()].assign(acc=lambda x: x["accelerator"].map(short_accelerator))
    rounds = sorted(sel["round"].unique(), key=round_key)
    look = style(dict(zip(sel["acc"], sel["accelerator"])))
    n = max(len(rounds), 1)
    width = 3.4 * n + 2.2  # the legend takes the last 2.2 inches
    fig, axes = plt.subplots(1, n, figsize=(width, 4.6), dpi=100, sharex=True, sharey=True, squeeze=False)
    # fixed margins, set before the names are placed: place_labels measures the final layout
    fig.subplots_adjust(left=0.7 / width, right=1 - 2.2 / width, bottom=0.12, top=0.84, wspace=0.08)
    earlier = sel.iloc[0:0]
    fronts = []
    for ax, r in zip(axes[0], rounds):
        d = sel[sel["round"] == r]
        for acc, g in d.groupby("acc"):  # every result, small, in its accelerator's marker and colour
            ax.scatter(
                g["accelerators"], g["score_min"], s=12, marker=look[acc]["marker"],
                color=look[acc]["color"], alpha=0.45, zorder=1, linewidths=0,
            )  # fmt: skip
        for (_sub, acc), fam in d.groupby(["submitter", "acc"]):
            best = fam.groupby("accelerators")["score_min"].min().sort_index()
            if len(best) > 1:
                ax.plot(
                    best.index.astype(float),
                    best.values,
                    color=look[acc]["color"],
                    lw=0.9,
                    alpha=0.55,
                    zorder=2,
                )
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
        fronts.append(front)
        for x, y, _sub, acc in front:
            ax.scatter(
                [x], [y], s=50, marker=look[acc]["marker"], color=look[acc]["color"],
                edgecolors="black", linewidths=0.7, zorder=4,
            )  # fmt: skip
        ax.set_title(f"{r} ({'/'.join(sorted(d['benchmark'].unique()))}, {len(d)} results)", fontsize=9)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, which="major", alpha=0.25)
        ax.set_xlabel("accelerators")
    ax0 = axes[0][0]
    ax0.margins(0.08)
    ax0.autoscale_view()
    readable_log_axis(ax0.xaxis, *ax0.get_xlim())  # shared: every panel gets the same ticks
    readable_log_axis(ax0.yaxis, *ax0.get_ylim())
    ax0.set_ylabel("time to train (minutes)")
    left_off = 0
    for ax, front in zip(axes[0], fronts):  # names last: they are placed in the final layout
        left_off += place_labels(
            ax, [(x, y) for x, y, _s, _a in front], [str(s)[:14] for _x, _y, s, _a in front]
        )
    _legend(fig, look, plt, width)
    title = f"MLPerf Training {'/'.join(names)}" + (f" on {accelerator}" if accelerator else "")
    title += ": lines join one submitter's results on one accelerator"
    if left_off:  # said, not silently dropped: no free spot beside the point in its panel
        title += f"\n({left_off} names of a round's best left off where they would overlap)"
    fig.suptitle(title, fontsize=10)
    return fig


def _legend(fig, look: dict, plt, width: float) -> None:
    """Accelerators grouped by family (one marker shape each), then what the marks mean."""
    handles = [
        plt.Line2D([], [], color=v["color"], marker=v["marker"], lw=1, label=f"{a} ({v['family']})")
        for a, v in sorted(look.items(), key=lambda kv: (kv[1]["family"], kv[0]))
    ]
    handles += [
        plt.Line2D([], [], color="0.6", marker="o", lw=0, markersize=4, alpha=0.5, label="a result"),
        plt.Line2D([], [], color="white", marker="o", markeredgecolor="black", lw=0, label="the round's best at its scale"),
        plt.Line2D([], [], color="white", marker="o", markeredgecolor="0.45", lw=0, label="best of earlier rounds"),
    ]  # fmt: skip
    fig.legend(
        handles=handles, loc="center left", bbox_to_anchor=(1 - 2.1 / width, 0.48), fontsize=7.5,
        frameon=False, ncol=1 if len(handles) <= 22 else 2,
    )  # fmt: skip
