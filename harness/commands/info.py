"""`mlperf benchmarks list|show` and `mlperf systems list|show|validate|export|doc`."""

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

    defs = [b.rules for b in registry.registered()]
    if as_json:
        from harness.core.rulesets import for_run

        rows = [
            d.model_dump() | {"runs_per_result": d.runs_per_result, "default_ruleset": for_run(d.name)[0]}
            for d in defs
        ]
        click.echo(json.dumps({"schema_version": 1, "benchmarks": rows}, indent=2))
        return OK
    from rich.table import Table

    from harness.core.rulesets import for_run

    t = Table(title="MLPerf Training benchmarks (runs follow the default ruleset; --ruleset picks another)")
    for col in ("name", "aliases", "quality target (full / tiny)", "runs", "default ruleset", "sizes"):
        t.add_column(col)
    for d in defs:
        target = "; ".join(
            f"{q.metric} {'<=' if q.direction == 'lower' else '>='} {q.full:g} / "
            f"{f'{q.tiny:g}' if 'tiny' in d.sizes else '-'}"  # no tiny size: no tiny target
            for q in d.quality
        )
        rs, name, _how = for_run(d.name)
        t.add_row(
            d.name, ", ".join(d.aliases), target, str(d.runs_per_result), f"{rs} ({name})", ", ".join(d.sizes)
        )
    _console().print(t)
    return OK


@benchmarks.command("show")
@click.argument("bench")
@click.option("--json", "as_json", is_flag=True)
def benchmarks_show(bench, as_json):
    """The rulesets of the installed mlperf-logging that list BENCH and what changed between them
    (name, quality window, required keys, closed hyperparameters, RCPs, run count)."""
    import benchmarks as registry
    from harness.core.rulesets import for_run
    from harness.review import ruleset_history

    d = registry.get(bench).rules
    hist = ruleset_history.history(d.name)
    diff = ruleset_history.changes(hist)
    default = for_run(d.name)
    if as_json:
        doc = {
            "schema_version": 1,
            "benchmark": d.name,
            "default_ruleset": {"ruleset": default[0], "name": default[1], "why": default[2]},
            "rulesets": [dict(h, rcps={str(k): v for k, v in h["rcps"].items()}) for h in hist],
            "changes": diff,
        }
        click.echo(json.dumps(doc, indent=2))
        return OK
    from rich.table import Table

    out = _console()
    t = Table(title=f"{d.name}: {d.title}", title_justify="left")
    for col in ("ruleset", "logged as", "quality window", "keys", "closed rules", "RCP batch sizes", "runs"):
        t.add_column(col)
    for h in hist:
        t.add_row(
            h["ruleset"] + (" (default)" if h["ruleset"] == default[0] else ""),
            h["name"],
            str(h["quality_window"]),
            str(len(h["required_keys"])),
            str(len(h["closed_hyperparameters"])),
            ", ".join(map(str, h["rcps"])) or "-",
            str(h["runs"]),
        )
    out.print(t)
    for c in diff:
        what = c["changes"]
        if not what:
            click.echo(f"{c['from']} -> {c['to']}: no change")
            continue
        click.echo(f"{c['from']} -> {c['to']}:")
        for field, v in what.items():
            for line in [v] if isinstance(v, str) else v:
                click.echo(f"  {field}: {line}")
    return OK


@click.group()
def systems():
    """System descriptors (systems/*.yaml)."""


@systems.command("list")
@click.option("--json", "as_json", is_flag=True)
def systems_list(as_json):
    """Every system on the --system search path (./systems/, $MLPERF_SYSTEMS_PATH, the shipped
    systems/), with the file each name comes from (the first found; the others are shadowed)."""
    from harness.core.errors import ConfigError
    from harness.resolve import system_search
    from harness.resolve import systems as sysmod

    rows = []  # (name, file used, files shadowed, spec or the line saying why it does not load)
    for name, files in sysmod.found().items():
        try:
            spec: object = sysmod.load(name)
        except ConfigError as e:  # one broken file of a user's must not hide the others
            spec = str(e)
        rows.append((name, system_search.shown(files[0]), [system_search.shown(f) for f in files[1:]], spec))
    if as_json:
        docs = [
            (s.model_dump(by_alias=True) if isinstance(s, sysmod.SystemSpec) else {"name": n, "error": s})
            | {"file": f, "shadows": sh}
            for n, f, sh, s in rows
        ]
        click.echo(json.dumps({"schema_version": 1, "systems": docs}, indent=2))
        return OK
    from rich.table import Table

    t = Table(title="systems (first on the search path wins)")
    for col in ("name", "nodes x accel", "accelerator", "launcher", "division", "file"):
        t.add_column(col)
    for name, f, shadowed, s in rows:
        where = f + "".join(f" (shadows {x})" for x in shadowed)
        if not isinstance(s, sysmod.SystemSpec):
            t.add_row(name, "-", f"invalid: mlperf systems validate {f}", "-", "-", where)
            continue
        world = f"{s.nodes} x {s.accelerators_per_node} = {s.world_size}"
        t.add_row(s.name, world, s.accelerator.model_name, s.launcher.kind, s.division, where)
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
    """Validate a descriptor file (or a name on the search path): every problem at once, one line
    each with the field and the fix (exit 2)."""
    from harness.core.errors import USAGE
    from harness.resolve import system_search
    from harness.resolve import systems as sysmod

    path = Path(file)
    if not path.exists():  # a name: the file `--system NAME` would read (unknown: one line)
        hits = [] if system_search.is_path(file) else system_search.candidates(file, sysmod.SYSTEMS_DIR)
        path = hits[0] if hits else Path(file)
        if not hits:
            sysmod.load(file)  # raises the one line: no such file, or where a name was looked for
    lines = sysmod.problems(path)
    if lines:
        for line in lines:  # one line each, every one in the contract's form (no summary after)
            click.echo(f"error: {line}", err=True)
        return USAGE
    spec = sysmod.load(file) if path != Path(file) else sysmod.load_file(path)  # by name: name = file
    click.echo(
        f"{path}: ok ({spec.name}: {spec.nodes} x {spec.accelerators_per_node} {spec.accelerator.model_name})"
    )
    return OK


def _emit(text: str, output: str | None) -> int:
    """`text` to stdout, or atomically to `output` with one line saying so."""
    if output:
        from harness.core.files import atomic_write

        atomic_write(Path(output), text)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)
    return OK


@systems.command("doc")
@click.option("-o", "--output", type=opt.OUT_FILE, help="Write here (atomically) instead of stdout.")
def systems_doc(output):
    """The descriptor reference (docs/systems.md), rendered from the model: a minimal example and
    every field with its type, unit, default and meaning."""
    from harness.resolve import systems_doc as doc

    return _emit(doc.markdown(), output)


@systems.command("export")
@click.argument("name")
@click.option("-o", "--output", type=opt.OUT_FILE, help="Write here (atomically) instead of stdout.")
def systems_export(name, output):
    """Write the official MLPerf system-description JSON for NAME."""
    from harness.resolve import systems as sysmod

    return _emit(json.dumps(sysmod.load(name).export_official(), indent=4) + "\n", output)
