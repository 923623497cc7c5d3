"""`mlperf plan --plot FILE.png`: predicted time-to-train against accelerator count (log-log) for
the planned system's accelerator under the stack it is priced as (named in the title and the
legend), the 80 % range the table prints as a band around it, and the published results of every
round the planner is fitted on (calibration.TABLES), one marker shape per accelerator family."""

from __future__ import annotations

from dataclasses import replace

from harness.core.errors import ConfigError
from harness.planner import calibration as C
from harness.planner import interval as I
from harness.planner.hardware import lookup
from harness.planner.search import Plan, search_layouts


def _acc(row) -> str:
    return (lookup(row.accelerator) or {}).get("name", row.accelerator)


def sweep(plan: Plan) -> list[tuple[int, float, list[float] | None]]:
    """(accelerators, best predicted minutes, 80 % range) for the same accelerator at 1/8x .. 8x
    the planned node count and at every published scale of it."""
    hw = plan.hardware
    node_counts = sorted(
        {max(1, round(hw.nodes * 2**e)) for e in range(-3, 4)}
        | {r.nodes for r in C.published() if r.bench == plan.bench.name and _acc(r) == hw.accelerator}
    )
    out = []
    for n in node_counts:
        at = replace(hw, nodes=n)
        try:
            p = search_layouts(plan.bench, at, stack=plan.stack)
        except ConfigError:
            continue  # nothing fits, or the batch rules exclude this size
        minutes = p.options[0].minutes
        # the range as the table computes it: wider beyond the largest fitted scale
        reasons = [r for r, _ in I.novelty(plan.bench.name, at, plan.stack)]
        out.append((n * hw.per_node, minutes, I.range_min(minutes, reasons)))
    return out


def figure(plan: Plan):
    """The matplotlib Figure (tests read its artists)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harness.core.plot_style import readable_log_axis, short_accelerator, style

    hw, stack = plan.hardware, plan.stack.key
    pts = sweep(plan)
    # black and grey for the prediction: tab10 colours are the published accelerators'
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=110, layout="constrained")
    band = [p for p in pts if p[2]]
    if band:
        ax.fill_between(
            [p[0] for p in band], [p[2][0] for p in band], [p[2][1] for p in band],
            color="0.55", alpha=0.25, lw=0, label="80 % range (as the table)", gid="range-band",
        )  # fmt: skip
    if pts:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", ms=3, color="black",
                label=f"planner: {hw.accelerator}, stack {stack}")  # fmt: skip
    best = plan.options[0].minutes
    rng = I.range_min(best, [r for r, _ in I.novelty(plan.bench.name, hw, plan.stack)])
    err = [[best - rng[0]], [rng[1] - best]] if rng else None
    ax.errorbar([hw.world], [best], yerr=err, fmt="*", ms=14, color="black", mfc="gold", capsize=3,
                label=f"{hw.name} (planned)")  # fmt: skip
    pub = [r for r in C.published() if r.bench == plan.bench.name]
    rounds = sorted({r.round for r in pub}, key=lambda v: tuple(int(x) for x in v.lstrip("v").split(".")))
    accs = {short_accelerator(_acc(r)): _acc(r) for r in pub}
    look = style(accs)
    for a in sorted(accs, key=lambda a: (look[a]["family"], a)):
        rows = [r for r in pub if short_accelerator(_acc(r)) == a]
        ax.plot([r.world for r in rows], [r.score_min for r in rows], look[a]["marker"], mfc="none",
                color=look[a]["color"], label=f"published: {a} ({look[a]['family']})")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.margins(0.08)
    ax.autoscale_view()
    readable_log_axis(ax.xaxis, *ax.get_xlim())
    readable_log_axis(ax.yaxis, *ax.get_ylim())
    ax.set_xlabel("accelerators")
    ax.set_ylabel("time to train (minutes)")
    span = f"{rounds[0]}-{rounds[-1]}" if len(rounds) > 1 else (rounds[0] if rounds else "none")
    ax.set_title(
        f"{plan.bench.name}: predicted as stack {stack} vs published ({span}, {len(pub)} results)",
        fontsize=10,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return fig


def draw(plan: Plan, path: str) -> None:
    import matplotlib.pyplot as plt

    fig = figure(plan)
    try:
        fig.savefig(path, bbox_inches="tight")  # the legend beside the axes is never cut
    except OSError as e:
        raise ConfigError(f"--plot {path}: cannot write ({e.strerror})") from None
    finally:
        plt.close(fig)
