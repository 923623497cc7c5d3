"""The one way a test finds its data files: `fixture_path("logs/closed_gnn.txt")`.

Everything lives in tests/data/fixtures.tar.xz (what is in it and where it comes from:
tests/data/fixtures.md). The archive is unpacked once per pytest run, on the first call, into a
folder that conftest.py makes for the run and removes at its end; the xdist workers share it (the
folder's name reaches them in an environment variable, a lock keeps two of them from unpacking at
once). A path that is not in the archive raises, so a missing fixture fails the test instead of
skipping it. The unpacked tree is shared by every test of the run: copy before editing.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
ARCHIVE = DATA / "fixtures.tar.xz"
ENV = "MLPERF_HARNESS_TEST_FIXTURES"  # the run's folder, set by conftest.py (or by the first call)
_DONE = ".unpacked"  # written last: its presence means the tree is complete


def new_root() -> Path:
    """A fresh folder for this run's unpacked fixtures, named in ENV for the processes it starts."""
    root = Path(tempfile.mkdtemp(prefix="mlperf-harness-fixtures-"))
    os.environ[ENV] = str(root)
    return root


def root() -> Path:
    """The unpacked archive (unpacked now if no process of this run has done it yet)."""
    if ENV in os.environ:
        base = Path(os.environ[ENV])
    else:  # imported outside pytest (a bench script): this process's own folder
        base = new_root()
        atexit.register(shutil.rmtree, base, True)
    if not (base / _DONE).exists():
        base.mkdir(parents=True, exist_ok=True)
        with open(base / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be unpacking: wait for it
            if not (base / _DONE).exists():
                with tarfile.open(ARCHIVE) as t:
                    t.extractall(base, filter="data")
                (base / _DONE).touch()
    return base


def fixture_path(rel: str) -> Path:
    """The file or folder `rel` of the archive, e.g. "mlperf_v4.0/NVIDIA" or "rounds/v5.0"."""
    path = root() / rel
    if not path.exists():
        raise FileNotFoundError(f"{rel!r} is not in {ARCHIVE} (see {DATA / 'fixtures.md'})")
    return path
