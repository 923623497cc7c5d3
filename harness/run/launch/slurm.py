"""Slurm: the runs of one `mlperf run` as ONE sbatch job, followed until it ends.

    render   the allocation's script (harness/run/launch/sbatch.py), written to every RUN_DIR/job.sbatch
    submit   sbatch --parsable job.sbatch -> job id (RUN_DIR/slurm_job_id: J, or J_k in an array)
             launcher.runs_as: sequence  one allocation runs the N runs one after another (one
                                         wait in the queue, as NVIDIA's run.sub)
                               array     a job array, task k runs run k (one allocation each)
    follow   squeue -h -r -t all -j J every POLL_S; a run has ended when the script has written
             RUN_DIR/exit_code; runs the job ended without one (killed, never started) get the
             job's ExitCode from `scontrol show job` (test clusters have no slurmdbd; `sacct -c`
             works where jobcomp/filetxt is set, as in .ci/slurm-up.sh)
    Ctrl-C   scancel the pending job; SIGINT to the batch shell (it starts no further run) and
             to the running step (torchrun forwards it, ranks stop at a step boundary and log
             run_stop aborted); after GRACE_S, scancel (SIGTERM, then SIGKILL after the
             cluster's KillWait); re-raise KeyboardInterrupt

The training processes belong to slurmd, not to `mlperf run`, so nothing of ours is orphaned by a
cancel; srun's --kill-on-bad-exit ends every node's ranks when one node's fail.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

from harness.core.errors import ConfigError, HarnessError
from harness.core.files import atomic_write
from harness.core.runfolder import EXIT_CODE_FILE
from harness.core.runplan import RunPlan
from harness.run.launch import jobinfo, sbatch

POLL_S = 0.3
GRACE_S = 20.0
CLIENT_TIMEOUT_S = 60.0
ENDING_S = 90.0  # a job's COMPLETING phase: the cluster's KillWait (30 s by default) + its epilog
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

    def script(self, plans: list[RunPlan], system, entry: str) -> str:
        return sbatch.render(plans, system, entry, apply_tuning=self.apply_tuning)

    def describe(self, plans, system, entry) -> str:
        return self.script(plans, system, entry)

    def run(self, plans, system, entry, monitor) -> None:
        text = self.script(plans, system, entry)  # refuse bad descriptors before anything is submitted
        preflight(system)
        old = system.launcher.container and jobinfo.ngc_python_too_old(system.launcher.container.image)
        if old:  # the job would fail on every node after its wait in the queue: say why first
            _status(monitor, plans[0], f"warning: {old}")
        array = system.launcher.runs_as == "array" and len(plans) > 1
        job_id = None
        try:
            for plan in plans:
                d = Path(plan.run_dir)
                (d / EXIT_CODE_FILE).unlink(missing_ok=True)  # a resumed run's earlier end
                (d / jobinfo.CACHE_FILE).unlink(missing_ok=True)  # and its earlier cache drop
                atomic_write(d / "job.sbatch", text)
                if system.power is not None:  # what the job's samplers read (power/job.py)
                    (d / "power").mkdir(exist_ok=True)
                    atomic_write(d / "power" / "power.json", system.power.model_dump_json(indent=1))
            out = _slurm("sbatch", "--parsable", str(Path(plans[0].run_dir) / "job.sbatch")).stdout.strip()
            job_id = out.split(";")[0]
            if not job_id.isdigit():
                raise HarnessError(f"slurm: sbatch answered {out!r} instead of a job id")
            for k, plan in enumerate(plans):
                atomic_write(
                    Path(plan.run_dir) / "slurm_job_id", (f"{job_id}_{k}" if array else job_id) + "\n"
                )
            how = "a job array" if array else ("one allocation" if len(plans) > 1 else "")
            _status(monitor, plans[0], f"slurm job {job_id} submitted" + (f" ({how})" if how else ""))
            self._follow(job_id, plans, array, monitor, jobinfo.drop_caches(system))
        except BaseException:  # Ctrl-C above all, but no error of ours may leave jobs running
            if job_id:
                cancel([job_id])
            raise

    def _follow(self, job_id: str, plans: list[RunPlan], array: bool, monitor, drop: bool = False) -> None:
        """Report each run as soon as its exit code is recorded; when the job has ended, the runs
        that recorded none (killed, cancelled, never started) get the job's (array task's) code."""
        live = list(plans)
        seen: dict[str, str] = {}
        failures = 0
        while live:
            p = _slurm("squeue", "-h", "-r", "-t", "all", "-j", job_id, "-o", "%i %T %M", check=False)
            if p.returncode != 0 and "Invalid job id" not in p.stderr:
                failures += 1  # slurmctld busy or restarting: keep asking for a while
                if failures * POLL_S > CLIENT_TIMEOUT_S:
                    raise HarnessError(
                        f"slurm: squeue keeps failing ({_first_line(p.stderr)}); job {job_id} is "
                        f"still in Slurm's hands"
                    )
                time.sleep(POLL_S)
                continue
            failures = 0
            rows = {}
            for line in p.stdout.splitlines():
                parts = line.split()
                if len(parts) >= 2:
                    rows[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "")
            for row, (state, elapsed) in rows.items():
                if seen.get(row) != state:
                    seen[row] = state
                    _status(monitor, live[0], f"slurm job {row} {state.lower()} {elapsed}".rstrip())
            ended = all(state in TERMINAL for state, _ in rows.values())
            for plan in list(live):
                rc = _exit_code(plan)
                task = f"{job_id}_{plans.index(plan)}" if array else job_id
                if rc is None and ended:
                    final, rc = job_state(task)
                    rc = rc or 1  # the job ended, this run never said how
                    _status(
                        monitor, plan, f"slurm job {task} {final.lower()} without an exit code (exit {rc})"
                    )
                if rc is None:
                    if Path(plan.log_path).exists():
                        monitor.poll(plan)
                    continue
                monitor.poll(plan)
                _status(monitor, plan, f"ended in slurm job {task} (exit {rc}){_error_line(plan, rc)}")
                refused = jobinfo.refused_line(Path(plan.run_dir)) if drop else ""
                if refused:  # wanted and refused: the log says cache_clear false, so do we
                    _status(monitor, plan, refused)
                live.remove(plan)
                monitor.finished(plan, rc)
            if live:
                time.sleep(POLL_S)
        # The last run wrote its exit code, but Slurm may still be COMPLETING the job (killing
        # stragglers, the epilog): wait for its end, so the state we report is the final one and
        # the nodes are free for a --resume or the next job.
        _wait_gone(job_id, ENDING_S)
        if not array:  # an array's tasks were reported one by one
            final, rc = job_state(job_id)
            _status(monitor, plans[-1], f"slurm job {job_id} {final.lower()} (exit {rc})")


def _error_line(plan: RunPlan, rc: int) -> str:
    """': <the run's one-line error>' when it failed with one (a refusal inside the job, e.g. a
    BMC that cannot be read), so the user sees why without opening stdout.log."""
    if rc == 0:
        return ""
    try:
        tail = (Path(plan.run_dir) / "stdout.log").read_text(errors="replace").strip().splitlines()[-1:]
    except OSError:
        return ""
    return f": {tail[0].removeprefix('error: ')}" if tail and tail[0].startswith("error: ") else ""


def _exit_code(plan: RunPlan) -> int | None:
    """The run's exit code as the job script recorded it, or None while it has not ended."""
    try:
        return int((Path(plan.run_dir) / EXIT_CODE_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


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
        # The batch shell first (its trap starts no further run), then the running step.
        _slurm("scancel", "--batch", "--signal=INT", *job_ids, check=False)
        _slurm("scancel", "--signal=INT", *job_ids, check=False)
        if not _wait_gone(ids, grace_s):
            _slurm("scancel", *job_ids, check=False)
            _wait_gone(ids, 60.0)
    except HarnessError:
        pass  # Slurm went away while cancelling: nothing more we can do from here
    finally:
        signal.signal(signal.SIGINT, old)


def _wait_gone(ids: str, timeout_s: float) -> bool:
    """True once squeue lists none of the jobs: its default filter shows pending, running and
    completing jobs only, so every one has reached its final state (or is forgotten)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        p = _slurm("squeue", "-h", "-j", ids, "-o", "%T", check=False)
        if p.returncode != 0 or not p.stdout.strip():
            return True
        time.sleep(POLL_S)
    return False


def available() -> bool:
    return shutil.which("sbatch") is not None
