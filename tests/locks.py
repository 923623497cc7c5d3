"""A readers-writer lock over the pytest-xdist workers of one run (tests/conftest.py): most tests
share the machine, a test marked `exclusive` has it alone. Two flock()ed files make it fair: every
taker passes the turnstile first, and a writer keeps the turnstile while it waits for the readers
to drain, so a stream of short shared tests cannot starve it. Without xdist it does nothing."""

from __future__ import annotations

import fcntl
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


def _paths() -> tuple[Path, Path] | None:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # the same in every worker of one run
    if not run:
        return None
    base = Path(tempfile.gettempdir()) / f"mlperf-harness-tests-{run}"
    return base.with_suffix(".turnstile"), base.with_suffix(".machine")


@contextmanager
def machine_lock(exclusive: bool):
    paths = _paths()
    if paths is None:
        yield
        return
    turnstile, machine = (open(p, "a+") for p in paths)
    try:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(machine, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(machine, fcntl.LOCK_UN)
    finally:
        turnstile.close()
        machine.close()
