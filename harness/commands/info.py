"""`mlperf benchmarks list` and `mlperf systems list|show|validate|export`."""

from __future__ import annotations

import json
from pathlib import Path

import click

from harness.commands import options as opt
from harness.core.errors import OK


def _console():
    from harness.commands.ui import out

    return out()


@click.group()
def benchmarks():
    """The benchmark registry."""


@benchmarks.command("list")
@click.option("--json", "as_json", is_flag=True)
def benchmarks_list(as_json):
    """Name, aliases, metric and target, runs per result, sizes."""
    import benchmarks as registry

    defs = [registry.get(n) for n in registry.available()]
    if as_json:
        click.echo(json.dumps({"schema_version": 1, "benchmarks": [d.model_dump() for d in defs]}, indent=2))
        return OK
    from rich.table import Table

    t = Table(title="MLPerf Training benchmarks (ruleset 4.0.0)")
    for col in ("name", "aliases", "quality target (full / tiny)", "runs", "RCP unit", "sizes"):
        t.add_column(col)
    for d in defs:
        target = "; ".join(
            f"{q.metric} {'<=' if q.direction == 'lower' else '>='} {q.full:g} / {q.tiny:g}"
            for q in d.quality
        )
        t.add_row(
            d.name, ", ".join(d.aliases), target, str(d.runs_per_result), d.rcp_unit, ", ".join(d.sizes)
        )
    _console().print(t)
    return OK


@click.group()
def systems():
    """System descriptors (systems/*.yaml)."""


@systems.command("list")
@click.option("--json", "as_json", is_flag=True)
def systems_list(as_json):
    """All shipped systems."""
    from harness.resolve import systems as sysmod

    specs = [sysmod.load(n) for n in sysmod.available()]
    if as_json:
        click.echo(
            json.dumps(
                {"schema_version": 1, "systems": [s.model_dump(by_alias=True) for s in specs]}, indent=2
            )
        )
        return OK
    from rich.table import Table

    t = Table(title="systems")
    for col in ("name", "nodes x accel", "accelerator", "memory (GiB)", "launcher", "division"):
        t.add_column(col)
    for s in specs:
        t.add_row(
            s.name,
            f"{s.nodes} x {s.accelerators_per_node} = {s.world_size}",
            s.accelerator.model_name,
            f"{s.accelerator.memory_gib:.1f}",
            s.launcher.kind,
            s.division,
        )
    _console().print(t)
    return OK


@systems.command("show")
@click.argument("name")
def systems_show(name):
    """A system's full descriptor (as YAML)."""
    import yaml

    from harness.resolve import systems as sysmod

    spec = sysmod.load(name)
    click.echo(yaml.safe_dump(spec.model_dump(by_alias=True), sort_keys=False))
    return OK


@systems.command("validate")
@click.argument("file", type=click.Path(dir_okay=False))
def systems_validate(file):
    """Validate a descriptor file (exit 2 with the field and the fix if it is wrong)."""
    from harness.resolve import systems as sysmod

    spec = sysmod.load_file(Path(file)) if Path(file).exists() else sysmod.load(file)
    click.echo(
        f"{file}: ok ({spec.name}: {spec.nodes} x {spec.accelerators_per_node} {spec.accelerator.model_name})"
    )
    return OK


@systems.command("export")
@click.argument("name")
@click.option("-o", "--output", type=opt.OUT_FILE, help="Write here (atomically) instead of stdout.")
def systems_export(name, output):
    """Write the official MLPerf system-description JSON for NAME."""
    from harness.resolve import systems as sysmod

    text = json.dumps(sysmod.load(name).export_official(), indent=4) + "\n"
    if output:
        from harness.core.files import atomic_write

        atomic_write(Path(output), text)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)
    return OK
