"""`mlperf plan BENCH --system NAME | --system-json FILE`: best layouts, memory, predicted time.

Prints the top K layouts (distinct TP/PP/VP/CP/MBS, each at its best global batch) with memory per
accelerator, the step-time breakdown and the predicted time-to-train; `--json` prints one document
whose `predicted_min` is the best layout's. Exit 2 (one line) for bad input: unknown system or
accelerator, a global batch the rules do not allow, nothing that fits in memory. Never imports torch.
"""

from __future__ import annotations

import json
import sys

import click

from harness.core.errors import ConfigError


@click.command("plan")
@click.argument("bench")
@click.option(
    "--system",
    "system_name",
    metavar="NAME",
    help="A shipped system (systems/NAME.yaml) or a descriptor path.",
)
@click.option(
    "--system-json",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="An official MLPerf system-description JSON (<org>/systems/<id>.json of a results repository).",
)
@click.option("--global-batch-size", "gbs", type=int, metavar="N", help="Plan for this global batch only.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.option("--top", default=5, show_default=True, type=click.IntRange(1, 100), help="Layouts to show.")
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    metavar="FILE.png",
    help="Also draw predicted time vs accelerator count with the published points.",
)
def plan(bench, system_name, system_json, gbs, as_json, top, plot_path):
    """Choose the parallel layout, check memory and predict time-to-train of BENCH on a system.

    \b
    Examples:
      mlperf plan gpt3 --system dgx-h100x64
      mlperf plan gpt3 --system dgx-h100x1452 --global-batch-size 2904 --top 10
      mlperf plan llama2_70b_lora --system-json NVIDIA/systems/eos_n8_ngc24.04_nemo.json --json
      mlperf plan gpt3 --system gb200-nvl72 --plot gpt3-gb200.png

    The constants behind the prediction are fitted on published results
    (harness/planner/data/efficiency.yaml; accuracy: python bench/bench_planner_accuracy.py).
    """
    from harness import planner
    from harness.planner import report

    if bool(system_name) == bool(system_json):
        raise ConfigError("give exactly one of --system NAME and --system-json FILE")
    hw = (
        planner.resolve_hardware(system_name)
        if system_name
        else planner.hardware.from_official_json(system_json)
    )
    result = planner.search.search_layouts(bench, hw, gbs=gbs)
    doc = report.to_json(result, top)
    if plot_path:
        from harness.planner import plot

        plot.draw(result, plot_path)
        doc["plot"] = plot_path
    if as_json:
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        report.render(result, doc, top)
        if plot_path:
            click.echo(f"plot: {plot_path}")
    return 0
