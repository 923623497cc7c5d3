"""Consoles for results (stdout) and progress (stderr): rich, NO_COLOR-aware, wide when piped."""

from __future__ import annotations

import os
import sys

from rich.console import Console


def out() -> Console:
    """stdout carries results only; tables are not wrapped at 80 columns when piped."""
    tty = sys.stdout.isatty()
    return Console(file=sys.stdout, width=None if tty else 140, no_color=bool(os.environ.get("NO_COLOR")))


def err() -> Console:
    return Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")))
