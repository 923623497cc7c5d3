"""Shared fixtures: run the real `mlperf` CLI in a subprocess and keep tests offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures import new_root

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def pytest_configure(config):
    # the run's folder for tests/data/fixtures.tar.xz (tests/fixtures.py); xdist workers are started
    # after this and inherit it through the environment, so only the controller (or -n 0) makes it
    if not hasattr(config, "workerinput"):
        config._fixture_root = new_root()


def pytest_unconfigure(config):
    root = getattr(config, "_fixture_root", None)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


def run_mlperf(*args: str, cwd: Path | None = None, timeout: float = 900, env: dict | None = None):
    """`mlperf ARGS...` as a user would run it; returns CompletedProcess (text)."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd or REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def mlperf():
    return run_mlperf


def has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    if has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
