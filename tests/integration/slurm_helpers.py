"""The local Slurm cluster of the Slurm tests (test_slurm.py, test_slurm_2n.py), shared by them.

`cluster()` makes sure a cluster answers, starting the two-node one (SLURM_CI_NODES=2
.ci/slurm-up.sh: nodes n1/n2 in their own UTS namespaces) when none does, and falls back to
one node where namespaces are refused (slurm-up exits 3 and says why in one line). It starts
at most once per pytest session; `stop()` (each module's session fixture teardown) stops it
when the session started it and no other pytest worker still uses it: each xdist worker is a
session of its own, and a worker that finished its tests once stopped the cluster under the
other worker's Slurm tests (seen in CI when test_slurm.py grew). Workers register in USERS.
Skips, saying why, only where Slurm cannot be installed or started here.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UP, DOWN = REPO / ".ci" / "slurm-up.sh", REPO / ".ci" / "slurm-down.sh"
STATE_DIR = Path(os.environ.get("SLURM_CI_STATE", "/tmp/slurm-ci"))

# The pytest processes using the cluster (a file per pid) and whether one of them started it;
# outside STATE_DIR, which slurm-down.sh removes.
USERS = STATE_DIR.parent / (STATE_DIR.name + "-pytest-users")
STARTED_MARK = "started-by-tests"

# Shared by every module that imports this one (one module object per session).
_STATE: dict = {"started": False, "checked": False, "skip": None, "two_nodes_refused": None}


def nodes() -> list[str] | None:
    """Nodes of partition 'debug' that are up, or None when no Slurm answers here."""
    if not shutil.which("sinfo"):
        return None
    argv = ["sinfo", "-h", "-N", "-p", "debug", "-o", "%N %t"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        return None
    rows = [ln.split() for ln in p.stdout.splitlines()]
    return [r[0] for r in rows if len(r) == 2 and r[1] in ("idle", "alloc", "mix", "comp")]


def up(nodes_wanted: int) -> subprocess.CompletedProcess:
    env = dict(os.environ, SLURM_CI_NODES=str(nodes_wanted))
    return subprocess.run(["bash", str(UP)], capture_output=True, text=True, timeout=300, env=env)


def down() -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(DOWN)], capture_output=True, text=True, timeout=120)


def cluster() -> list[str]:
    """The up nodes of partition 'debug' (starting a cluster if needed), or pytest.skip."""
    with _users_lock():  # one worker starts it; the other waits here, then finds it up
        _check_or_start()
        if not _STATE["skip"]:  # registered before the lock is let go: no stop() in between
            (USERS / str(os.getpid())).touch()
            if _STATE["started"]:
                (USERS / STARTED_MARK).touch()
    if _STATE["skip"]:
        pytest.skip(_STATE["skip"])
    return nodes() or []


def _check_or_start() -> None:
    if not _STATE["checked"]:
        _STATE["checked"] = True
        if nodes() is None:
            if os.geteuid() != 0:
                _STATE["skip"] = "no local Slurm is running and starting one needs root (.ci/slurm-up.sh)"
            elif not shutil.which("sbatch") and not shutil.which("apt-get"):
                _STATE["skip"] = "Slurm is not installed and there is no apt-get to install it"
            else:
                p = up(2)
                if p.returncode == 3:  # namespaces refused: one node still tests the Slurm path
                    _STATE["two_nodes_refused"] = p.stderr.strip().splitlines()[-1]
                    p = up(1)
                if p.returncode != 0 or not nodes():
                    why = (p.stderr or p.stdout)[-500:]
                    _STATE["skip"] = f"could not start a local Slurm with .ci/slurm-up.sh: {why}"
                else:
                    _STATE["started"] = True
        elif not nodes():
            _STATE["skip"] = (
                "the Slurm answering here has no up node in partition 'debug' (systems/cpu-slurm*)"
            )


@contextmanager
def _flock(name: str, mode: int):
    """flock(mode) on USERS/name, held for the with block (shared by every pytest worker)."""
    USERS.mkdir(parents=True, exist_ok=True)
    with open(USERS / name, "a") as f:
        fcntl.flock(f, mode)
        yield


def _users_lock():
    return _flock(".lock", fcntl.LOCK_EX)


@contextmanager
def in_use(exclusive: bool = False):
    """Held by every Slurm test while it runs (shared) and by the test that stops and restarts the
    cluster (exclusive, with the users lock, so that no worker starts a cluster meanwhile): the
    cluster is cycled between the other worker's Slurm tests, never under one, whatever order
    xdist hands them out in (it once skipped whenever the other worker had used Slurm first)."""
    with _flock(".in-use", fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH), ExitStack() as also:
        if exclusive:
            also.enter_context(_users_lock())
        yield


def started_by_tests() -> bool:
    """This pytest run's tests started the cluster (whichever worker): not a developer's own."""
    return (USERS / STARTED_MARK).exists()


def other_users() -> list[int]:
    """Other live pytest processes registered as using the cluster."""
    me, out = os.getpid(), []
    for f in USERS.glob("[0-9]*"):
        pid = int(f.name)
        if pid != me and Path(f"/proc/{pid}").exists():
            out.append(pid)
    return out


def two_nodes() -> list[str]:
    """Two up nodes named n1 and n2 (the two-node cluster), or pytest.skip saying why not."""
    found = cluster()
    if _STATE["two_nodes_refused"]:
        pytest.skip(_STATE["two_nodes_refused"])
    if sorted(found)[:2] != ["n1", "n2"]:
        pytest.skip(f"the Slurm answering here is not the two-node test cluster (nodes: {found})")
    return found


def stop() -> None:
    """Stop the cluster if this session's tests started it and no other worker still uses it
    (the last user stops it, whichever worker started it)."""
    with _users_lock():
        (USERS / str(os.getpid())).unlink(missing_ok=True)
        if (USERS / STARTED_MARK).exists() and not other_users():
            down()
            (USERS / STARTED_MARK).unlink(missing_ok=True)
    _STATE["started"] = False


def job(job_id: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True).stdout
    return dict(f.split("=", 1) for f in out.split() if "=" in f)


def processes_mentioning(text: str) -> list[str]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd:
                found.append(f"{d.name}: {cmd[:200]}")
    return found


def uts_namespace(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/uts")
    except OSError:
        return None
