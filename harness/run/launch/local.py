"""One process (`local`) or N processes on this host under torchrun (`torchrun`).

torchrun (torch.distributed.run) owns the rendezvous: `--standalone` picks a free port on this
host, sets RANK/WORLD_SIZE/LOCAL_RANK/MASTER_* for every rank, and fails the whole run when one
rank fails, printing that rank's error; the training code's try/finally logs run_stop aborted.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from harness.core.runplan import RunPlan
from harness.run.launch import jobinfo

POLL_S = 0.5


def _env(plan: RunPlan, system, cpu_only: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    env.update(system.launcher.env)
    env["OMP_NUM_THREADS"] = str(plan.threads_per_process)
    env.setdefault("HF_HUB_OFFLINE", "1")  # no weights or data from a hub, ever
    env.setdefault("PYTHONUNBUFFERED", "1")
    if cpu_only or plan.device == "cpu":
        # A CPU process on a GPU host must not see the GPU: megatron-core puts its buffers on
        # torch.cuda.current_device() whenever CUDA is visible, whatever device the model is on
        # (on an H200, gpt3's tiny pretraining on the CPU failed in baddbmm: "batch1 is on cpu");
        # hidden, the process takes the CPU path CI tests (cpu_compat), with CI's numbers.
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


class LocalLauncher:
    name = "local"

    def __init__(self, apply_tuning: bool = False):
        self.apply_tuning = apply_tuning  # node tuning is a cluster-prologue matter; unused here

    def argv(self, plan: RunPlan, entry: str) -> list[str]:
        return [sys.executable, "-m", entry, "--plan", str(Path(plan.run_dir) / "plan.json")]

    def describe(self, plans, system, entry) -> str:
        p = plans[0]
        env = f"OMP_NUM_THREADS={p.threads_per_process} "
        lines = [env + shlex.join(self.argv(p, entry))]
        if len(plans) > 1:
            lines.append(
                f"# ... then the same for runs 2..{len(plans)}, in sequence, each with its own plan.json"
            )
        return "\n".join(lines)

    def run(self, plans, system, entry, monitor) -> None:
        for plan in plans:
            rc = self._run_one(plan, system, entry, monitor)
            monitor.finished(plan, rc)

    def run_module(
        self,
        plan,
        system,
        module: str,
        plan_file: Path | list[Path],
        log_name: str = "prepare.log",
        cpu_only: bool = False,
    ) -> tuple[int, str]:
        """One helper process for plan file(s) (data preparation, builds), its output kept in
        run_dir/log_name. `cpu_only` hides any GPU (data preparation: tiny data is then made as CI
        makes it, the same bytes, and full data is only looked at)."""
        files = plan_file if isinstance(plan_file, list) else [plan_file]
        argv = [sys.executable, "-m", module, *(a for f in files for a in ("--plan", str(f)))]
        log = Path(plan.run_dir) / log_name
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=_env(plan, system, cpu_only),
                start_new_session=True,
            )
            try:
                rc = proc.wait()
            except KeyboardInterrupt:
                stop_tree(proc)
                raise
        # The child's last line is its one-line `error: ...` (harness.train.entry); the caller
        # relays it, so the user sees the cause once.
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] if rc else []
        return rc, (tail[0] if tail else "")

    def _run_one(self, plan, system, entry, monitor) -> int:
        run_dir = Path(plan.run_dir)
        env = _env(plan, system)
        if jobinfo.drop_caches(system):
            # The rules' cache clear (harness/run/launch/jobinfo.py); the rank logs cache_clear
            # from MLPERF_CACHE_CLEARED, and a refusal is said here, not only in the log.
            done, why = jobinfo.drop_here()
            env["MLPERF_CACHE_CLEARED"] = "1" if done else "0"
            if not done:
                say = getattr(monitor, "status", None)
                if say is not None:
                    say(plan, f"page cache NOT dropped ({why}); the log says cache_clear false")
        # Power mode: the samplers read before the rank starts and are stopped by pid whatever
        # way it ends (the with block); a BMC that cannot be read refuses the run before it starts.
        with (
            power_capture(system, run_dir, [socket.gethostname()]),
            open(run_dir / "stdout.log", "ab") as out,
        ):
            proc = subprocess.Popen(
                self.argv(plan, entry),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
            try:
                while proc.poll() is None:
                    monitor.poll(plan)
                    time.sleep(POLL_S)
            except KeyboardInterrupt:
                stop_tree(proc)
                raise
            monitor.poll(plan)
            return proc.returncode


class TorchrunLauncher(LocalLauncher):
    name = "torchrun"

    def argv(self, plan: RunPlan, entry: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nnodes",
            "1",
            "--nproc-per-node",
            str(plan.layout.procs_per_node),
            "-m",
            entry,
            "--plan",
            str(Path(plan.run_dir) / "plan.json"),
        ]


def power_capture(system, run_dir: Path, hostnames: list[str]):
    """The run's power samplers (harness/run/power/capture.py), or nothing without `power:`."""
    if system.power is None:
        return contextlib.nullcontext()
    from harness.run.power.capture import Capture

    return Capture(system.power, run_dir, hostnames)


def stop_tree(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """Stop a run and everything under it: SIGINT first (training stops at a step boundary and
    logs run_stop aborted), then SIGTERM, then SIGKILL, so no orphan outlives `mlperf run`.

    Signals go to every descendant, not to a process group: torch elastic starts each rank in a
    session of its own, so killing torchrun's group alone would leave the ranks training.
    """
    import psutil

    def tree() -> list[psutil.Process]:
        try:
            root = psutil.Process(proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    seen: dict[int, psutil.Process] = {}
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        for p in tree():  # re-walk: ranks may have started children since the last signal
            seen.setdefault(p.pid, p)
        alive = [p for p in seen.values() if p.is_running()]
        if not alive:
            break
        for p in alive:
            try:
                p.send_signal(sig)
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(alive, timeout=wait)
        if not alive:
            break
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
