"""`mlperf plan BENCH --system NAME | --system-json FILE`: best layouts, memory, predicted time.

Two modes. Search (a full-size system, no --size/--set/--nproc-per-node): the top K layouts
(distinct TP/PP/VP/CP/MBS, each at its best global batch) under the system's software stack.
Run (--size, --set or --nproc-per-node given, or a CPU system whose default size is tiny): the one
run `mlperf run` would start with the same options, priced under stack mlperf-harness.
`--calibrate RUN_DIR...` fits the mlperf-harness constants of this system on finished runs and
stores them (~/.cache/mlperf-harness/calibration/<system>.yaml, or --out); later plans use them.
`--json` prints one document whose `predicted_min` is the best layout's. Exit 2 (one line) for
bad input. Never imports torch.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import click

from harness.commands import options as opt
from harness.core.errors import ConfigError


@click.command("plan")
@click.argument("bench")
@click.argument("run_dirs", nargs=-1, type=click.Path(file_okay=False), metavar="[RUN_DIR]...")
@click.option(
    "--system",
    "system_name",
    metavar="NAME",
    help="A descriptor path, or a name looked up in ./systems/, $MLPERF_SYSTEMS_PATH, then the shipped systems/.",
)
@click.option(
    "--system-json",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="An official MLPerf system-description JSON (<org>/systems/<id>.json of a results repository).",
)
@click.option(
    "--stack", metavar="NAME[@VERSION]", help="Software stack (default: recognised from the system)."
)
@click.option(
    "--size", type=click.Choice(["tiny", "full"]), help="Price the run `mlperf run --size` would start."
)
@click.option(
    "--set", "sets", multiple=True, metavar="KEY=VALUE", help="Config override, as `mlperf run --set`."
)
@click.option("--nproc-per-node", type=int, help="Processes per node, as `mlperf run --nproc-per-node`.")
@opt.nodes
@opt.ruleset
@opt.round_name
@click.option(
    "--global-batch-size",
    "gbs",
    # 2^24: 256 x the largest global batch any RCP lists (BERT's 65,536); beyond it is a typo
    type=click.IntRange(1, 2**24),
    metavar="N",
    help="Plan for this global batch only (1 to 16,777,216).",
)
@click.option("--calibrate", is_flag=True, help="Fit this system's mlperf-harness constants on RUN_DIRs.")
@click.option("--out", "out_file", type=opt.OUT_FILE, metavar="FILE", help="Where --calibrate writes.")
@click.option(
    "--calibration", "cal_file", type=click.Path(dir_okay=False), metavar="FILE", help="Use this calibration."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.option(
    "--explain", is_flag=True, help="Show each term of the best layout's step time with its formula."
)
@click.option("--top", default=5, show_default=True, type=click.IntRange(1, 100), help="Layouts to show.")
@click.option("--plot", "plot_path", type=opt.OUT_FILE, metavar="FILE.png", help="Also draw time vs size.")
def plan(bench, run_dirs, system_name, system_json, stack, size, sets, nproc_per_node, nodes, ruleset, round_name, gbs,
         calibrate, out_file, cal_file, as_json, explain, top, plot_path):  # fmt: skip
    """Choose the parallel layout, check memory and predict time-to-train of BENCH on a system.

    \b
    Examples:
      mlperf plan gpt3 --system dgx-h100x64
      mlperf plan gpt3 --system dgx-h100x1452 --global-batch-size 2904 --top 10 --explain
      mlperf plan llama2_70b_lora --system-json NVIDIA/systems/eos_n8_ngc24.04_nemo.json --json
      mlperf plan gpt3 --system cpu-local --size tiny --nproc-per-node 2 --set tensor_model_parallel_size=2
      mlperf plan gpt3 --system cpu-local --calibrate results/runs/gpt3/cpu-local/<id>

    The constants are fitted on the 172 published v3.0-v4.1 results (harness/planner/data/); the
    error the JSON reports, forward in time first, comes from python bench/bench_planner_accuracy.py.
    """
    import benchmarks
    from harness import planner
    from harness.commands import plan_show
    from harness.planner import report, selfcal, stacks

    if bool(system_name) == bool(system_json):
        raise ConfigError("give exactly one of --system NAME and --system-json FILE")
    if run_dirs and not calibrate:
        raise ConfigError(f"unexpected argument '{run_dirs[0]}': run folders go with --calibrate")
    run_mode = bool(size or sets or nproc_per_node)
    if system_json and (run_mode or calibrate):
        raise ConfigError("--size/--set/--nproc-per-node/--calibrate need a shipped --system (a descriptor)")
    b = benchmarks.get(bench)  # the name, resolved once: the object travels down
    hw = (
        planner.resolve_hardware(system_name)
        if system_name
        else planner.hardware.from_official_json(system_json)
    )
    if nodes:  # --nodes: the same machine at another scale (run mode re-resolves it below)
        hw = dataclasses.replace(hw, nodes=nodes)
    st = stacks.for_plan(hw, stack)  # its `how` names the stack the other form of the machine gets
    if calibrate:
        doc = selfcal.calibrate(b, system_name, hw, list(run_dirs), out_file)
        _emit(doc, as_json, plan_show.render_calibration)
        return 0
    user = selfcal.load(hw.name, cal_file) if st.name == "mlperf-harness" else None
    if not run_mode and hw.kind == "cpu":
        run_mode = True  # `mlperf run` on a CPU system runs the tiny size: price exactly that
    if run_mode:
        if gbs:
            sets = (*sets, f"global_batch_size={gbs}")
        result = planner.price_run(
            b, system_name, size, sets, nproc_per_node, st, user, ruleset, round_name, nodes=nodes
        )
    else:
        from harness.core.rulesets import for_run

        rs = for_run(b.official, ruleset, round_name)[0]  # the RCPs of that ruleset
        result = planner.search.search_layouts(b, hw, gbs=gbs, stack=st, user=user, ruleset=rs)
    doc = report.to_json(result, top, "run" if run_mode else "search", user)
    if explain:
        from harness.planner import explain as ex

        doc["explain"] = ex.terms(result)
    if plot_path:
        from harness.planner import plot

        plot.draw(result, plot_path)
        doc["plot"] = plot_path
    if as_json:
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
        return 0
    plan_show.render(result, doc, top)
    if plot_path:
        click.echo(f"plot: {plot_path}")
    return 0


def _emit(doc: dict, as_json: bool, render) -> None:
    if as_json:
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        render(doc)
