"""What a launch promises, in words `--dry-run` prints and the job script repeats: the Slurm time
limit with its arithmetic, whether the page cache is dropped (and why), and what a container
image must hold. One place, so the script, the dry run and the run's messages cannot disagree.

Time limit. `launcher.time_limit_min` is the limit of ONE run. A job asks for
runs x time_limit_min + SETUP_MIN, as NVIDIA's MLPerf configs do (config_*.sh:
`WALLTIME=$(( 15 + NEXP * WALLTIME_MINUTES ))`, `sbatch -t $WALLTIME run.sub`, one job running
NEXP runs); a job array asks for one run + SETUP_MIN per task.

Cache. MLPerf Training rules (timing: "flush caches before each run"; every log carries
`cache_clear`, a key the compliance checker's training_*/common.yaml requires, though any value
passes it) expect a cleared page cache before each closed run. NVIDIA's run.sub does it with
`sync && sudo /sbin/sysctl vm.drop_caches=3` on every node; we do the same (as root, or with
`sudo -n`, which fails at once instead of asking for a password) and log what really happened.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]  # the checkout the job mounts (sbatch.py takes it)

# Minutes a job needs beyond its runs: container start on every node, the cache drop, node
# tuning, rendezvous. NVIDIA's configs add 5 to 15 minutes; 10 is the middle.
SETUP_MIN = 10

# The file each run's folder gets from the job: 1 = the page cache was dropped, 0 = not.
CACHE_FILE = "cache_cleared"

# NGC PyTorch images before 25.01 ship Python < 3.12 (24.xx: Ubuntu 22.04, Python 3.10); 25.01
# and later Ubuntu 24.04 with Python 3.12. Source: NVIDIA's "PyTorch Release Notes"
# (docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/rel-YY-MM.html, "Ubuntu 24.04
# including Python 3.12" from 25.01; the 25.12 page installs torch into
# /usr/local/lib/python3.12). This harness needs Python >= 3.12 (megatron-core >= 0.17), so an
# older image cannot hold it.
FIRST_PY312_NGC = (25, 1)
_NGC_PYTORCH = re.compile(r"nvcr\.io[/#]nvidia/pytorch:(\d{2})\.(\d{2})\b")


def drop_caches(system) -> bool:
    """launcher.drop_caches, or when unset: on for GPU systems (the closed rules expect it), off
    for CPU ones (development boxes and CI, where a job has no root and shares the cache)."""
    on = system.launcher.drop_caches
    return system.accelerator.kind == "gpu" if on is None else bool(on)


def time_limit(system, n_runs: int) -> tuple[int, str]:
    """(minutes for `#SBATCH --time`, the arithmetic in one line)."""
    lc = system.launcher
    per_run = lc.time_limit_min
    if lc.runs_as == "array" and n_runs > 1:
        minutes = per_run + SETUP_MIN
        return minutes, (
            f"time limit: {n_runs} runs as a job array, each task 1 run x {per_run} min + "
            f"{SETUP_MIN} min setup = {minutes} min (#SBATCH --time={minutes})"
        )
    minutes = n_runs * per_run + SETUP_MIN
    runs = "1 run" if n_runs == 1 else f"{n_runs} runs"
    return minutes, (
        f"time limit: {runs} x {per_run} min + {SETUP_MIN} min setup = {minutes} min "
        f"(#SBATCH --time={minutes})"
    )


def cache_line(system, where: str = "every node") -> str:
    lc = system.launcher
    if drop_caches(system):
        why = "launcher.drop_caches: true" if lc.drop_caches else "default for GPU systems"
        return (
            f"page cache: dropped before each run on {where} ({why}; as root or with sudo -n), "
            "as the closed rules expect; a node that refuses makes the run log cache_clear false "
            "and say so"
        )
    why = "launcher.drop_caches: false" if lc.drop_caches is False else "default for CPU systems"
    closed = "; the closed rules expect a cleared cache" if system.division == "closed" else ""
    return f"page cache: NOT dropped ({why}): every run logs cache_clear false{closed}"


def image_lines(container, repo: Path) -> list[str]:
    """What the image must hold, the truth about where the code comes from, and a warning for
    an NGC PyTorch tag too old for Python 3.12."""
    wd = container.workdir or str(repo)
    lines = [
        f"container: {container.image}; it must hold Python >= 3.12, a CUDA torch and this "
        "harness's dependencies (e.g. an image derived from it with "
        "`pip install --no-build-isolation -e '.[gpu]'` run from this checkout); the job "
        "installs nothing",
        f"container code: this checkout, mounted at {repo} and run from it (workdir)"
        if wd == str(repo)
        else f"container code: workdir {wd} is not this checkout ({repo}, mounted): the image's "
        "own installed harness runs",
    ]
    old = ngc_python_too_old(container.image)
    if old:
        lines.append(f"warning: {old}")
    return lines


def ngc_python_too_old(image: str) -> str:
    """A one-line reason when `image` is an NGC PyTorch tag known to ship Python < 3.12, else ''."""
    m = _NGC_PYTORCH.search(image)
    if not m or (int(m[1]), int(m[2])) >= FIRST_PY312_NGC:
        return ""
    return (
        f"image {image}: NGC PyTorch {m[1]}.{m[2]} ships Python < 3.12 (25.01 and later: 3.12); "
        "this harness needs Python >= 3.12, use e.g. nvcr.io/nvidia/pytorch:25.11-py3"
    )


def notes(plans, system, launcher: str, repo: Path = REPO) -> list[str]:
    """The lines `--dry-run` prints about the launch."""
    if launcher != "slurm":
        return [cache_line(system, "this host")]
    lines = [time_limit(system, len(plans))[1], cache_line(system)]
    if system.launcher.container is not None:
        lines += image_lines(system.launcher.container, repo)
    return lines


def refused_line(run_dir: Path) -> str:
    """After a run: the one line saying the page cache was wanted but not dropped, or ''."""
    try:
        cleared = (Path(run_dir) / CACHE_FILE).read_text().strip()
    except OSError:
        return ""
    if cleared != "0":
        return ""
    return (
        "page cache NOT dropped (a node refused sysctl vm.drop_caches: no root, no passwordless "
        "sudo); the log says cache_clear false"
    )


def drop_here() -> tuple[bool, str]:
    """Drop this host's page cache (the local and torchrun launchers): (done, why not)."""
    argv = ["sysctl", "-q", "-w", "vm.drop_caches=3"]
    if os.geteuid() != 0:
        argv = ["sudo", "-n", *argv]  # -n: fail at once rather than wait for a password
    os.sync()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    last = (p.stderr or p.stdout).strip().splitlines()[-1:]
    return p.returncode == 0, last[0] if last else f"exit {p.returncode}"
