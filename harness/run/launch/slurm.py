"""Slurm: one sbatch job per run (each with its own plan and seed), followed until it ends.

    render   RUN_DIR/job.sbatch (harness/run/launch/sbatch.py), the job's readable artifact
    submit   sbatch --parsable RUN_DIR/job.sbatch  -> job id (also written to RUN_DIR/slurm_job_id)
    follow   squeue -h -t all -j J1,J2,..  every POLL_S; on a terminal state read ExitCode from
             `scontrol show job J` (test clusters have no accounting, so no sacct)
    Ctrl-C   scancel the pending jobs; SIGINT the running steps (torchrun forwards it, ranks stop
             at a step boundary and log run_stop aborted); after GRACE_S, scancel (SIGTERM, then
             SIGKILL after the cluster's KillWait); re-raise KeyboardInterrupt

Runs are independent jobs rather than an array: every run already has its own folder, plan and
seed, and `scancel`/`squeue` on plain ids needs no array-index bookkeeping. The training
processes belong to slurmd, not to `mlperf run`, so nothing of ours is orphaned by a cancel.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

from harness.core.errors import ConfigError, HarnessError
from harness.core.runplan import RunPlan
from harness.run.launch import sbatch

POLL_S = 0.3
GRACE_S = 20.0
CLIENT_TIMEOUT_S = 60.0
TERMINAL = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "REVOKED",
    "SPECIAL_EXIT",
}


def _slurm(*argv: str, check: bool = True, timeout: float = CLIENT_TIMEOUT_S) -> subprocess.CompletedProcess:
    """Run a Slurm client in its own session, so a terminal Ctrl-C reaches only `mlperf run`."""
    try:
        p = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, start_new_session=True
        )
    except FileNotFoundError:
        raise ConfigError(
            f"slurm: '{argv[0]}' not found on PATH; run on a Slurm login node or use --launcher torchrun"
        ) from None
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"slurm: '{' '.join(argv[:2])}' did not answer within {timeout:.0f} s; is slurmctld reachable?"
        ) from None
    if check and p.returncode != 0:
        raise ConfigError(f"slurm: {argv[0]} failed: {_first_line(p.stderr or p.stdout)}")
    return p


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no message)"


def preflight(system) -> None:
    """Slurm answers and the descriptor's partition exists: one clear line otherwise (exit 2)."""
    p = _slurm("sinfo", "-h", "-o", "%R", check=False)
    if p.returncode != 0:
        raise ConfigError(f"slurm: controller not reachable ({_first_line(p.stderr)})")
    partitions = sorted(set(p.stdout.split()))
    part = system.launcher.partition
    if part and part not in partitions:
        raise ConfigError(
            f"system '{system.name}': launcher.partition '{part}' does not exist on this "
            f"cluster (partitions: {', '.join(partitions) or 'none'})"
        )


def job_state(job_id: str) -> tuple[str, int]:
    """(JobState, exit code) from `scontrol show job`: the code, or 128+signal, or 1 if neither."""
    p = _slurm("scontrol", "-o", "show", "job", job_id, check=False)
    fields = dict(f.split("=", 1) for f in p.stdout.split() if "=" in f)
    state = fields.get("JobState", "UNKNOWN")
    code, _, sig = fields.get("ExitCode", "1:0").partition(":")
    rc, sig = int(code or 1), int(sig or 0)
    if rc == 0 and sig:
        rc = 128 + sig
    if rc == 0 and state != "COMPLETED":
        rc = 1
    return state, rc


class SlurmLauncher:
    name = "slurm"

    def __init__(self, apply_tuning: bool = False):
        self.apply_tuning = apply_tuning

    def script(self, plan: RunPlan, system, entry: str) -> str:
        return sbatch.render(plan, system, entry, apply_tuning=self.apply_tuning)

    def describe(self, plans, system, entry) -> str:
        text = self.script(plans[0], system, entry)
        if len(plans) > 1:
            more = "run 2" if len(plans) == 2 else f"runs 2..{len(plans)}"
            text += f"# ... {more}: one job each, the same script with its own RUN_DIR (plan.json, seed)\n"
        return text

    def run(self, plans, system, entry, monitor) -> None:
        for plan in plans:  # refuse bad descriptors before anything is submitted
            self.script(plan, system, entry)
        preflight(system)
        jobs: dict[str, RunPlan] = {}
        try:
            for plan in plans:
                path = Path(plan.run_dir) / "job.sbatch"
                path.write_text(self.script(plan, system, entry))
                path.chmod(0o755)
                out = _slurm("sbatch", "--parsable", str(path)).stdout.strip()
                job_id = out.split(";")[0]
                if not job_id.isdigit():
                    raise HarnessError(f"slurm: sbatch answered {out!r} instead of a job id")
                (Path(plan.run_dir) / "slurm_job_id").write_text(job_id + "\n")
                jobs[job_id] = plan
                _status(monitor, plan, f"slurm job {job_id} submitted")
            self._follow(jobs, monitor)
        except BaseException:  # Ctrl-C above all, but no error of ours may leave jobs running
            cancel(list(jobs))
            raise

    def _follow(self, jobs: dict[str, RunPlan], monitor) -> None:
        live = dict(jobs)
        seen: dict[str, str] = {}
        failures = 0
        while live:
            p = _slurm("squeue", "-h", "-t", "all", "-j", ",".join(live), "-o", "%i %T %M", check=False)
            if p.returncode != 0 and "Invalid job id" not in p.stderr:
                failures += 1  # slurmctld busy or restarting: keep asking for a while
                if failures * POLL_S > CLIENT_TIMEOUT_S:
                    raise HarnessError(
                        f"slurm: squeue keeps failing ({_first_line(p.stderr)}); jobs "
                        f"{', '.join(live)} are still in Slurm's hands"
                    )
                time.sleep(POLL_S)
                continue
            failures = 0
            listed = {}
            for line in p.stdout.splitlines():
                parts = line.split()
                if len(parts) >= 2:
                    listed[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "")
            for job_id, plan in list(live.items()):
                state, elapsed = listed.get(job_id, ("GONE", ""))
                if state in ("RUNNING", "COMPLETING"):
                    monitor.poll(plan)
                if seen.get(job_id) != state and state != "GONE":
                    seen[job_id] = state
                    _status(monitor, plan, f"slurm job {job_id} {state.lower()} {elapsed}".rstrip())
                if state in TERMINAL or state == "GONE":
                    final, rc = job_state(job_id)
                    monitor.poll(plan)
                    _status(monitor, plan, f"slurm job {job_id} {final.lower()} (exit {rc})")
                    del live[job_id]
                    monitor.finished(plan, rc)
            if live:
                time.sleep(POLL_S)


def _status(monitor, plan, text: str) -> None:
    """Optional: monitors with a `status(plan, text)` method show the job's state and elapsed time."""
    fn = getattr(monitor, "status", None)
    if fn is not None:
        fn(plan, text)


def cancel(job_ids: list[str], grace_s: float = GRACE_S) -> None:
    """Stop our jobs: pending ones at once, running ones by SIGINT first (clean run_stop aborted)."""
    if not job_ids:
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not abandon the jobs
    try:
        ids = ",".join(job_ids)
        _slurm("scancel", "--state=PENDING", *job_ids, check=False)
        _slurm("scancel", "--signal=INT", *job_ids, check=False)
        if not _wait_gone(ids, grace_s):
            _slurm("scancel", *job_ids, check=False)
            _wait_gone(ids, 60.0)
    except HarnessError:
        pass  # Slurm went away while cancelling: nothing more we can do from here
    finally:
        signal.signal(signal.SIGINT, old)


def _wait_gone(ids: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        p = _slurm("squeue", "-h", "-j", ids, "-o", "%T", check=False)
        if p.returncode != 0 or not p.stdout.strip():
            return True
        time.sleep(POLL_S)
    return False


def available() -> bool:
    return shutil.which("sbatch") is not None
