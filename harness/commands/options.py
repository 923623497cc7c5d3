"""The options that mean the same in every command that resolves a run (`run`, `lr-find`, and
`plan` where it prices a run): one definition each, so their names and help never drift apart."""

from __future__ import annotations

import click

from harness.core.errors import ConfigError
from harness.core.files import check_output_path


class OutPath(click.Path):
    """An output file or folder, checked when the option is parsed (core/files.py
    check_output_path), so a path under a regular file is a usage error before any work."""

    def __init__(self, folder: bool):
        super().__init__(file_okay=not folder, dir_okay=folder)
        self.folder = folder

    def convert(self, value, param, ctx):
        value = super().convert(value, param, ctx)
        try:
            check_output_path(value, folder=self.folder)  # click names the option
        except ConfigError as e:
            self.fail(str(e), param, ctx)
        return value


OUT_FILE, OUT_FOLDER = OutPath(folder=False), OutPath(folder=True)

system = click.option(
    "--system",
    "system",
    default="cpu-local",
    show_default=True,
    help="A descriptor file, or a name looked up in ./systems/, then $MLPERF_SYSTEMS_PATH "
    "(colon-separated folders), then the shipped systems/ (`mlperf systems list`).",
)
nodes = click.option(
    "--nodes",
    type=click.IntRange(min=1),
    metavar="N",
    help="Run the system at N nodes instead of its descriptor's count (same config and launcher; "
    "the layout is derived again for N).",
)
size = click.option(
    "--size", type=click.Choice(["tiny", "full"]), help="Default: tiny on CPU systems, full elsewhere."
)
data_dir = click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    help="Dataset folder (default: ~/.cache/mlperf-harness/data/<bench>/<size>).",
)
sets = click.option(
    "--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a config value (repeatable)."
)
nproc_per_node = click.option(
    "--nproc-per-node", type=int, help="Processes per node (default: the system's accelerators per node)."
)
launcher = click.option(
    "--launcher", type=click.Choice(["local", "torchrun", "slurm"]), help="Override the system's launcher."
)
as_json = click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")

ruleset = click.option(
    "--ruleset",
    metavar="X.Y.Z",
    help="MLPerf ruleset to follow (default: the newest of the installed mlperf-logging that lists "
    "the benchmark; `mlperf benchmarks show BENCH` lists them).",
)
round_name = click.option(
    "--round", "round_name", metavar="vX.Y", help="The ruleset of an MLPerf round (v5.0 -> 5.0.0)."
)
