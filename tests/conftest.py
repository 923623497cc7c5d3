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


# pytest-xdist (`-n 2 --dist loadgroup`, pyproject addopts): a test file runs whole on one worker,
# so its module fixtures (prepared data, a shared run) are made once; files that share a session
# cache or a service are one group. The 2 CI cores then stay busy: most tests are one process.
XDIST_GROUPS = {
    "test_gpt3_tp2.py": "gpt3-record-layout",  # both use gpt3_helpers.record_layout_run
    "test_gpt3_resume.py": "gpt3-record-layout",
    "test_slurm.py": "slurm",  # one local cluster per session (slurm_helpers)
    "test_slurm_2n.py": "slurm",
}


# Tests that start several ranks (gloo) or time themselves run ALONE on the machine: two ranks
# sharing 2 cores with the other worker's process wait on each other at every collective (a TP=2
# gpt3 run took ~3x its idle time), and timing assertions need a quiet machine. Every other test
# holds a shared lock while it runs; these hold it exclusively (tests/locks.py, a fair RW lock
# across the xdist workers).
EXCLUSIVE = {
    "test_gpt3_tp2.py",
    "test_gpt3_resume.py",
    "test_gpt3_dist_ckpt.py",
    "test_llama2_tiny.py",
    "test_planner_calibration.py",  # 2 ranks, and it asserts 20 % only on a quiet machine
    "test_slurm.py",
    "test_slurm_2n.py",
    "test_diagnose_runs.py",  # a healthy run must show no unstable speed
}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        name = item.path.name
        item.add_marker(pytest.mark.xdist_group(XDIST_GROUPS.get(name, name)))
        if name in EXCLUSIVE:
            item.add_marker(pytest.mark.exclusive)
    if has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Setup, call and teardown (module fixtures start runs there) under the machine lock."""
    from locks import machine_lock

    with machine_lock(exclusive=item.get_closest_marker("exclusive") is not None):
        yield
