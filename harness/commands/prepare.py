"""`mlperf prepare BENCH`: generate tiny data deterministically, or validate a full dataset."""

from __future__ import annotations

import click

from harness.commands import options as opt
from harness.core.errors import OK


@click.command()
@click.argument("benchmark")
@click.option("--size", type=click.Choice(["tiny", "full"]), default="tiny", show_default=True)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    help="Dataset folder (default: ~/.cache/mlperf-harness/data/<bench>/<size>).",
)
@click.option(
    "--system",
    default=None,
    help="System whose config shapes the data (default: cpu-local for tiny; for full dgx-h100x8, or the "
    "benchmark's first shipped system where it ships no dgx-h100x8 config).",
)
@opt.ruleset
@opt.round_name
@click.option("--force", is_flag=True, help="Regenerate tiny data even if it is already prepared.")
def prepare(benchmark, size, data_dir, system, ruleset, round_name, force):
    """Prepare BENCHMARK's data. Tiny: synthetic, deterministic, offline. Full: check that every
    file of the official dataset is where it should be, and say what is missing and where it comes from."""
    import tempfile

    import benchmarks
    from harness.run import execute

    bench = benchmarks.get(benchmark)
    system = system or _default_system(bench, size)
    with tempfile.TemporaryDirectory(prefix="mlperf-prepare-") as tmp:
        r = execute.resolve(
            bench,
            system,
            size=size,
            runs=1,
            seed=0,
            results_dir=tmp,
            data_dir=data_dir,
            ruleset=ruleset,
            round_name=round_name,
        )
        execute.write_plans(r.plans)
        plan = r.plans[0]
        if force:
            from pathlib import Path

            (Path(plan.data_dir) / "PREPARED.json").unlink(missing_ok=True)
        execute.prepare(bench, r.plans, r.system)
        click.echo(f"{bench.name} ({size}) data ready in {plan.data_dir}")
    return OK


def _default_system(bench, size: str) -> str:
    """A system the benchmark's full size fits: full data does not depend on the layout, but the
    plan that names its folder needs one (deepseekv3_671b's 671 B fit no 64-GPU H100 layout)."""
    if size == "tiny":
        return "cpu-local"
    shipped = sorted(p.stem for p in bench.configs_dir.glob("*.yaml") if p.stem != "tiny")
    return "dgx-h100x8" if "dgx-h100x8" in shipped or not shipped else shipped[0]
