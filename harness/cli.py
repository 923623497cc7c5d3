"""`mlperf`: the thin click layer. Each command lives in harness/commands/<name>.py and is imported
only when invoked, so `mlperf --help` never imports torch, pandas or the official checkers.

Exit codes: 0 ok, 1 internal error, 2 usage/config error, 3 quality target not reached,
4 check failed, 130 interrupted.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from harness import __version__
from harness.core.errors import EXIT_CODES, INTERNAL, INTERRUPTED, USAGE, HarnessError

# command name -> "module:attribute" (a click.Command); order = order in --help
COMMANDS = {
    "run": ("harness.commands.run:run", "Run a benchmark on a system: tiny on cpu-local, full on clusters."),
    "prepare": ("harness.commands.prepare:prepare", "Generate (tiny) or validate (full) a benchmark's data."),
    "check": ("harness.commands.check:check", "Check logs or a submission tree with the official checkers."),
    "results": ("harness.commands.results:results", "Score, ingest and compare results."),
    "plan": ("harness.commands.plan:plan", "Choose a parallel layout and predict time-to-train."),
    "diagnose": ("harness.commands.diagnose:diagnose", "Find why a run is slow or not converging."),
    "lr-find": ("harness.commands.lr_find:lr_find", "LR range test for a benchmark."),
    "benchmarks": ("harness.commands.info:benchmarks", "List the benchmarks and their rules."),
    "systems": ("harness.commands.info:systems", "List, show, validate and export system descriptors."),
}

EPILOG = "Exit codes: " + "; ".join(f"{k} {v}" for k, v in EXIT_CODES.items()) + "."


class LazyGroup(click.Group):
    """click's documented lazy-loading pattern: import a subcommand's module on first use."""

    def list_commands(self, ctx):
        return [n for n, (target, _) in COMMANDS.items() if _exists(target)]

    def get_command(self, ctx, name):
        if name not in COMMANDS or not _exists(COMMANDS[name][0]):
            return None
        module, attr = COMMANDS[name][0].split(":")
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx, formatter):
        # Short help from the table above: listing commands must not import them.
        rows = [(n, COMMANDS[n][1]) for n in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _exists(target: str) -> bool:
    module = target.split(":")[0]
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), *module.split(".")) + ".py"
    return os.path.exists(path)


@click.group(cls=LazyGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mlperf (mlperf-harness)")
@click.option("--debug", is_flag=True, help="Show tracebacks for internal errors.")
@click.pass_context
def cli(ctx, debug):
    """Run, check and score MLPerf Training v4.0 benchmarks (gpt3, llama2_70b_lora, gnn,
    stable_diffusion) on the system described in systems/."""
    ctx.ensure_object(dict)["debug"] = debug


def _error(message: str) -> None:
    """The contract's one line: a value quoted from the input may hold a newline or another line
    break (U+0085, U+2028) or control character, which would split or garble it; those are
    written as escapes."""
    safe = "".join(
        c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii") for c in message
    )
    click.echo(f"error: {safe}", err=True)


def _click_message(e: click.ClickException) -> str:
    """click's usage message as the contract's one line: the cause, then where the help is (click
    prints `Usage: ...`, `Try ...`, a blank line and `Error: ...` instead)."""
    msg = " ".join(e.format_message().split())
    ctx = getattr(e, "ctx", None)
    if isinstance(e, click.UsageError) and ctx is not None:
        msg += f" (see '{ctx.command_path} --help')"
    return msg


def main(argv=None):
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        rv = cli.main(args=argv, prog_name="mlperf", standalone_mode=False)
        sys.exit(rv if isinstance(rv, int) else 0)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        _error(_click_message(e))
        # click's own errors are all bad input (usage, a --file it could not open): never exit 1
        sys.exit(USAGE if e.exit_code == INTERNAL else e.exit_code)
    except click.exceptions.Abort:
        click.echo("error: interrupted", err=True)
        sys.exit(INTERRUPTED)
    except HarnessError as e:
        _error(str(e))
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        sys.exit(INTERRUPTED)
    except Exception as e:  # noqa: BLE001 - last line of defence: one line, exit 1
        if debug:
            raise
        _error(f"internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)")
        sys.exit(INTERNAL)


if __name__ == "__main__":
    main()
