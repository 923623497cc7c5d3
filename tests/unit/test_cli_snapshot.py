"""The CLI is frozen, as torchtitan freezes its own: every command, argument and option of `mlperf`
is in tests/data/cli_snapshot.json, so a change to the interface is a deliberate one.

After a deliberate change:  MLPERF_UPDATE_CLI_SNAPSHOT=1 python -m pytest tests/unit/test_cli_snapshot.py
and commit the new snapshot with the change.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

SNAPSHOT = Path(__file__).resolve().parents[1] / "data" / "cli_snapshot.json"


def describe(cmd: click.Command, ctx: click.Context) -> dict:
    out: dict = {"params": []}
    for p in cmd.params:
        row = {"name": p.name, "kind": type(p).__name__, "type": p.type.name, "required": p.required}
        if isinstance(p, click.Option):
            row["opts"] = sorted(p.opts + p.secondary_opts)
            row["multiple"] = p.multiple
            row["flag"] = p.is_flag
        if isinstance(p.type, click.Choice):
            row["choices"] = list(p.type.choices)
        out["params"].append(row)
    if isinstance(cmd, click.Group):
        out["commands"] = {}
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            out["commands"][name] = describe(sub, click.Context(sub, parent=ctx, info_name=name))
    return out


def current() -> dict:
    from harness.cli import cli

    return describe(cli, click.Context(cli, info_name="mlperf"))


def test_the_cli_matches_its_snapshot():
    now = current()
    if os.environ.get("MLPERF_UPDATE_CLI_SNAPSHOT"):
        SNAPSHOT.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    frozen = json.loads(SNAPSHOT.read_text())
    assert now == frozen, (
        "the CLI changed: if deliberate, regenerate tests/data/cli_snapshot.json "
        "(MLPERF_UPDATE_CLI_SNAPSHOT=1) and commit it with the change"
    )
