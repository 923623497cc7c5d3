"""`mlperf plan --plot FILE.png`: predicted time-to-train against accelerator count (log-log) for
the planned system's accelerator, with the published results the project ships beside it."""

from __future__ import annotations

from dataclasses import replace

from harness.core.errors import ConfigError
from harness.planner import calibration as C
from harness.planner.hardware import lookup
from harness.planner.search import Plan, search_layouts


def _acc(row) -> str:
    return (lookup(row.accelerator) or {}).get("name", row.accelerator)


def sweep(plan: Plan) -> list[tuple[int, float]]:
    """Best predicted minutes for the same accelerator at 1/8x .. 8x the planned node count."""
    hw = plan.hardware
    node_counts = sorted(
        {max(1, round(hw.nodes * 2**e)) for e in range(-3, 4)}
        | {r.nodes for r in C.published() if r.bench == plan.bench.name and _acc(r) == hw.accelerator}
    )
    out = []
    for n in node_counts:
        try:
            p = search_layouts(plan.bench, replace(hw, nodes=n), stack=plan.stack)
        except ConfigError:
            continue  # nothing fits, or the batch rules exclude this size
        out.append((n * hw.per_node, p.options[0].minutes))
    return out


def draw(plan: Plan, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hw = plan.hardware
    pts = sweep(plan)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if pts:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", ms=3, label=f"planner: {hw.accelerator}")
    ax.plot([hw.world], [plan.options[0].minutes], "*", ms=14, label=f"{hw.name} (planned)")
    pub = [r for r in C.published() if r.bench == plan.bench.name]
    for acc in sorted({_acc(r) for r in pub}):
        rows = [r for r in pub if _acc(r) == acc]
        ax.plot(
            [r.world for r in rows],
            [r.score_min for r in rows],
            "s",
            mfc="none",
            label=f"published v3.0-v4.0: {acc}",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("accelerators")
    ax.set_ylabel("time to train (minutes)")
    ax.set_title(f"{plan.bench.name}: predicted vs published")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as e:
        raise ConfigError(f"--plot {path}: cannot write ({e.strerror})") from None
    finally:
        plt.close(fig)
