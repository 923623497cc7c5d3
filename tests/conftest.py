"""Shared fixtures: run the real `mlperf` CLI in a subprocess and keep tests offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO.parent / "shared" / "fixtures"
os.environ.setdefault("HF_HUB_OFFLINE", "1")


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


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.exists():
        pytest.skip(f"shared fixtures not found at {FIXTURES}")
    return FIXTURES


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
