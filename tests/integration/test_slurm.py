"""The Slurm launcher against a REAL single-node Slurm (munged + slurmctld + slurmd, .ci/slurm-up.sh).

    mlperf run gpt3 --system cpu-slurm --runs 1   sbatch -> srun -> torchrun -> 2 gloo ranks
    SIGINT of `mlperf run`                        job cancelled, run_stop aborted, no orphans
    bad input                                     unreachable Slurm, missing partition, shell
                                                  metacharacters: exit 2 with one line

The session fixture starts the cluster when it isn't up (and stops it again afterwards); the
tests skip, saying why, only where Slurm cannot be installed or started (not root, no apt).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers import events

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
UP, DOWN = REPO / ".ci" / "slurm-up.sh", REPO / ".ci" / "slurm-down.sh"


def _partitions() -> list[str] | None:
    """Partitions of the Slurm that answers here, or None when none does."""
    if not shutil.which("sinfo"):
        return None
    p = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True, timeout=60)
    return p.stdout.split() if p.returncode == 0 else None


@pytest.fixture(scope="session")
def slurm():
    started = False
    parts = _partitions()
    if parts is None:
        if os.geteuid() != 0:
            pytest.skip("no local Slurm is running and starting one needs root (.ci/slurm-up.sh)")
        if not shutil.which("sbatch") and not shutil.which("apt-get"):
            pytest.skip("Slurm is not installed and there is no apt-get to install it")
        p = subprocess.run(["bash", str(UP)], capture_output=True, text=True, timeout=300)
        parts = _partitions()
        if p.returncode != 0 or parts is None:
            pytest.skip(
                f"could not start a local Slurm with .ci/slurm-up.sh: {(p.stderr or p.stdout)[-500:]}"
            )
        started = True
    if "debug" not in parts:
        pytest.skip(f"the Slurm answering here has no partition 'debug' (systems/cpu-slurm.yaml): {parts}")
    yield
    if started:
        subprocess.run(["bash", str(DOWN)], capture_output=True, timeout=120)


def _run_dir(results: Path) -> Path:
    dirs = sorted((results / "runs" / "gpt3" / "cpu-slurm").glob("*"))
    assert len(dirs) == 1, dirs
    return dirs[0]


def _job(run_dir: Path) -> dict[str, str]:
    job_id = (run_dir / "slurm_job_id").read_text().strip()
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True).stdout
    return dict(f.split("=", 1) for f in out.split() if "=" in f)


def _processes_mentioning(text: str) -> list[str]:
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


def test_gpt3_tiny_through_sbatch_srun_torchrun(slurm, mlperf, tmp_path):
    results = tmp_path / "results"
    t0 = time.monotonic()
    r = mlperf(
        "run",
        "gpt3",
        "--system",
        "cpu-slurm",
        "--runs",
        "1",
        "--seed",
        "1",
        "--results-dir",
        str(results),
        timeout=600,
    )
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    run_dir = _run_dir(results)
    script = (run_dir / "job.sbatch").read_text()
    assert "python -m torch.distributed.run" in script.replace(sys.executable, "python")
    assert "--nproc-per-node=2" in script and "--rdzv-backend=c10d" in script
    job = _job(run_dir)
    assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", job
    assert job["NumNodes"] == "1" and job["Partition"] == "debug"
    assert "slurm job" in r.stderr and "completed" in r.stderr  # progress shows the job's state
    result = results / "MyOrg" / "results" / "cpu-slurm" / "gpt3" / "result_0.txt"
    ev = events(result)
    first = {e["key"]: e for e in reversed(ev)}
    assert first["run_stop"]["metadata"]["status"] == "success"
    assert first["cache_clear"]["value"] is False  # cpu-slurm may not drop the page cache
    assert first["submission_platform"]["value"] == "1xCPU"
    print(f"end-to-end {elapsed:.1f} s; job {job['JobId']} RunTime {job['RunTime']}")

    if not (REPO / "benchmarks" / "gpt3" / "tiny_rules.yaml").exists():
        pytest.skip("benchmarks/gpt3/tiny_rules.yaml is not there yet: cannot check the tiny log")
    c = mlperf("check", str(result))
    assert c.returncode == 0, c.stdout[-3000:] + c.stderr[-3000:]


def test_sigint_cancels_the_job_and_logs_aborted(slurm, tmp_path):
    results = tmp_path / "results"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "gpt3",
            "--system",
            "cpu-slurm",
            "--runs",
            "1",
            "--seed",
            "2",
            "--results-dir",
            str(results),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        log = None
        while time.monotonic() < deadline and proc.poll() is None:
            logs = list((results / "runs").glob("gpt3/cpu-slurm/*/mlperf.log"))
            if logs and "run_start" in logs[0].read_text():
                log = logs[0]
                break
            time.sleep(0.1)
        assert log is not None, "training never started"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        stop_s = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("error: interrupted"), err[-1000:]
    run_dir = log.parent
    stops = [e for e in events(log) if e["key"] == "run_stop"]
    assert len(stops) == 1 and stops[0]["metadata"]["status"] == "aborted", stops
    job = _job(run_dir)
    assert job["JobState"] in ("CANCELLED", "FAILED", "COMPLETED"), job
    assert (
        subprocess.run(["squeue", "-h", "-j", job["JobId"]], capture_output=True, text=True).stdout.strip()
        == ""
    )
    assert _processes_mentioning(str(run_dir)) == []
    print(f"SIGINT -> exit in {stop_s:.1f} s; job {job['JobId']} {job['JobState']} {job['ExitCode']}")


def _descriptor(tmp_path: Path, **launcher) -> Path:
    data = yaml.safe_load((REPO / "systems" / "cpu-slurm.yaml").read_text())
    data["launcher"].update(launcher)
    path = tmp_path / "cpu-slurm.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _one_line_error(r, *needles: str) -> None:
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), r.stderr[-2000:]
    for n in needles:
        assert n in last, last
    assert "Traceback" not in r.stderr


def _run_gpt3(mlperf, tmp_path: Path, system: str, *extra: str, env: dict | None = None):
    """`mlperf run gpt3 --system SYSTEM --runs 1`, results under tmp_path/results."""
    args = (
        "run",
        "gpt3",
        "--system",
        system,
        "--runs",
        "1",
        "--results-dir",
        str(tmp_path / "results"),
        *extra,
    )
    return mlperf(*args, env=env)


def test_unreachable_slurm_is_one_line(slurm, mlperf, tmp_path):
    conf = Path("/etc/slurm/slurm.conf").read_text().replace("SlurmctldPort=6817", "SlurmctldPort=6999")
    (tmp_path / "slurm.conf").write_text(conf + "\nMessageTimeout=1\n")
    r = _run_gpt3(mlperf, tmp_path, "cpu-slurm", env={"SLURM_CONF": str(tmp_path / "slurm.conf")})
    _one_line_error(r, "slurm", "not reachable")


def test_slurm_not_installed_is_one_line(slurm, mlperf, tmp_path):
    r = _run_gpt3(mlperf, tmp_path, "cpu-slurm", env={"PATH": str(Path(sys.executable).parent)})
    _one_line_error(r, "not found on PATH")


def test_missing_partition_is_one_line(slurm, mlperf, tmp_path):
    r = _run_gpt3(mlperf, tmp_path, str(_descriptor(tmp_path, partition="nopart")))
    _one_line_error(r, "launcher.partition", "nopart", "does not exist")


def test_shell_metacharacters_are_refused(slurm, mlperf, tmp_path):
    """Every field is covered in tests/unit/test_sbatch_render.py; here the CLI end of it."""
    canary = tmp_path / "pwned"
    system = _descriptor(tmp_path, env={"NCCL_DEBUG": f"INFO$(touch {canary})"})
    for extra in (["--dry-run"], []):
        r = _run_gpt3(mlperf, tmp_path, str(system), *extra)
        _one_line_error(r, "launcher.env.NCCL_DEBUG", "metacharacter")
    assert not canary.exists()
    assert not list((tmp_path / "results").glob("runs/*/*/*/job.sbatch"))


class _Recorder:
    def __init__(self):
        self.polls, self.done, self.notes = 0, {}, []

    def poll(self, plan):
        self.polls += 1

    def finished(self, plan, returncode):
        self.done[plan.run_index] = returncode

    def status(self, plan, text):
        self.notes.append((plan.run_index, text))


def test_runs_are_jobs_with_their_own_plans(slurm, tmp_path):
    """--runs 2 -> two jobs, one plan/seed each, every end reported (a fast torch-free entry)."""
    from harness.run import execute as runner
    from harness.run.launch import get

    r = runner.resolve("gpt3", "cpu-slurm", runs=2, seed=100, results_dir=tmp_path)
    plans = [
        p if p.run_index != 1 else p.model_copy(update={"config": {**p.config, "global_batch_size": 13}})
        for p in r.plans
    ]
    runner.write_plans(plans)
    rec = _Recorder()
    get("slurm", apply_tuning=False).run(plans, r.system, "tests.integration.slurm_entry", rec)
    assert rec.done[0] == 0 and rec.done[1] != 0, rec.done  # torchrun maps 3 to 1
    job_ids = {(Path(p.run_dir) / "slurm_job_id").read_text() for p in plans}
    assert len(job_ids) == 2
    for p in plans:
        ev = {e["key"]: e for e in events(Path(p.log_path))}
        assert ev["seed"]["value"] == 100 + p.run_index
        assert ev["harness_world"]["value"] == 2  # torchrun started 2 ranks; only rank 0 logged
        assert ev["harness_world"]["metadata"]["cache_cleared_env"] == "0"
        assert (Path(p.run_dir) / "job.sbatch").exists()
    assert any("running" in t for _, t in rec.notes) or any("completed" in t for _, t in rec.notes)
