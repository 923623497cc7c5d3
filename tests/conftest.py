"""Shared fixtures: run the real `mlperf` CLI in a subprocess and keep tests offline."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures import new_root

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The suite runs two xdist workers on two cores, each mostly busy; torch's default of one OpenMP
# thread per core then puts four threads on two cores, and a small in-process model ran several
# times slower (measured: a fresh UNet's two evals, 2.4 s alone, 20 s beside a busy worker).  One
# thread per worker; set before anything imports torch.  The training subprocesses already get 1
# from cpu-local's threads_per_process.
os.environ.setdefault("OMP_NUM_THREADS", "1")
if "torch" in sys.modules:  # a plugin imported it first: the variable is read only at import
    sys.modules["torch"].set_num_threads(1)
# A shell starts a background job (`pytest &`, nohup, some CI runners) with SIGINT ignored, and an
# ignored signal stays ignored across exec: every `mlperf run` a test starts would then shrug off the
# Ctrl-C that the interrupt tests send it, and train on to the end (4 tests failed so). A handler,
# unlike SIG_IGN, is reset to the default at exec, so the processes the tests start get Ctrl-C as
# a user's terminal delivers it. The controller and each xdist worker run this.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


# The modules with the longest tests, longest first. xdist hands tests out in collection order, so
# starting these first keeps both workers busy to the end instead of one long test running alone
# at the tail (ordering only: every test still runs; measured with `--durations=15`).
LONGEST_FIRST = (
    "test_run_gpt3_cli.py",  # makes the quick start's 3 runs (the calibration reuses the first)
    "test_gpt3_tp2.py",  # makes plain TP=2, the record layout and DP=2 (later modules reuse them)
    "test_sd_tiny.py",
    "test_slurm_2n.py",
    "test_llama2_tiny.py",
    "test_gpt3_resume.py",
    "test_gpt3_bf16.py",
    "test_planner_calibration.py",  # late: by then the runs it shares are made
    "test_lr_find.py",
    "test_gnn_tiny.py",
)


def _order(item) -> tuple[int, int]:
    name = item.path.name
    if name in LONGEST_FIRST:
        return (0, LONGEST_FIRST.index(name))
    return (1 if "slow" in item.keywords else 2, 0)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_order)  # stable: the order inside a module is kept
    if has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# MLPERF_TEST_TIMELINE=FILE: one line per test phase (worker, start, stop, nodeid), appended by every
# worker; what bench/suite_timeline.py reads to show where a worker waited or sat alone at the tail.
_TIMELINE = os.environ.get("MLPERF_TEST_TIMELINE")


if _TIMELINE:
    import resource as _resource
    import time as _time

    def _cpu_s() -> float:
        """CPU seconds of this worker and of every child process it has waited for (a child's
        rusage includes its own waited-for children: torchrun's ranks, sbatch's none)."""
        return sum(
            r.ru_utime + r.ru_stime
            for r in (
                _resource.getrusage(_resource.RUSAGE_SELF),
                _resource.getrusage(_resource.RUSAGE_CHILDREN),
            )
        )

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        t0, c0 = _time.time(), _cpu_s()
        yield
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(_TIMELINE, "a") as f:
            f.write(f"{worker}\t{t0:.2f}\t{_time.time():.2f}\t{_cpu_s() - c0:.2f}\t{item.nodeid}\n")
