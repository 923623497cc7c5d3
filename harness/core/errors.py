"""Exit codes and the exceptions that carry them to the CLI.

Every failure the user can fix ends as one line `error: ...` and one of these codes
(documented in the README and in `mlperf --help`). Only `InternalError` paths print a traceback,
and only with `--debug`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

OK = 0
INTERNAL = 1
USAGE = 2  # usage or configuration error (also click's own code for bad options)
TARGET_NOT_REACHED = 3
CHECK_FAILED = 4
INTERRUPTED = 130

EXIT_CODES = {
    OK: "success / compliant",
    INTERNAL: "unexpected internal error",
    USAGE: "usage or configuration error",
    TARGET_NOT_REACHED: "a run finished without reaching its quality target",
    CHECK_FAILED: "a compliance, package or RCP check failed",
    INTERRUPTED: "interrupted (SIGINT/SIGTERM)",
}


class HarnessError(Exception):
    """An error with a user-facing one-line message and an exit code."""

    exit_code = INTERNAL

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class ConfigError(HarnessError):
    """Bad input: unknown name or key, malformed file, impossible layout. Exit 2."""

    exit_code = USAGE


class TargetNotReached(HarnessError):
    exit_code = TARGET_NOT_REACHED


class CheckFailed(HarnessError):
    exit_code = CHECK_FAILED


class Interrupted(HarnessError):
    exit_code = INTERRUPTED


def suggest(name: str, choices: Iterable[str], canonical: dict[str, str] | None = None) -> str:
    """' (did you mean X?)' when a close match exists, else ''. `canonical` maps a choice (an
    alias) to the name to show, so three spellings of one benchmark are named once."""
    choices = list(choices)
    key = str(name).lower()
    # A prefix of several names ('llama3' of llama31_8b, 'llama' of both llamas) names them all:
    # the closest by spelling alone ('llama2') may not be the one meant.
    starts = [c for c in choices if len(key) >= 3 and c.lower().startswith(key)]
    close = starts or difflib.get_close_matches(str(name), choices, n=1, cutoff=0.6)
    shown = list(dict.fromkeys((canonical or {}).get(c, c) for c in close))[:3]
    return f" (did you mean {' or '.join(repr(c) for c in shown)}?)" if shown else ""
