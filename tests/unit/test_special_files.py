"""An input named on the command line that is a FIFO or a device is refused with one line (exit 2)
before anything opens it: reading a FIFO blocks until a writer comes (forever, for a mistyped
path), and /dev/zero never ends. Without the check each of these commands hangs, so the subprocess
timeout turns a regression into a failure instead of a stuck CI."""

from __future__ import annotations

import os

import pytest

COMMANDS = [
    ("diagnose", "{f}"),
    ("systems", "validate", "{f}"),
    ("check", "{f}"),
    ("plan", "gpt3", "--system-json", "{f}"),
    ("run", "gpt3", "--system", "{f}", "--dry-run"),
]


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "system.yaml"  # a descriptor's suffix: `--system` then takes it as a file
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_fifo_is_refused_in_one_line(mlperf, fifo, args):
    r = mlperf(*(a.format(f=fifo) for a in args), timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.strip() == r.stderr.strip().splitlines()[0], r.stderr
    assert f"error: {fifo} is not a regular file (a FIFO, socket or device)" in r.stderr, r.stderr


def test_a_device_is_refused_too(mlperf):
    r = mlperf("plan", "gpt3", "--system-json", "/dev/zero", timeout=60)
    assert r.returncode == 2 and "/dev/zero is not a regular file" in r.stderr, r.stderr
