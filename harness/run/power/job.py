"""Power capture inside a Slurm job (harness/run/launch/sbatch.py renders the calls): the samplers
run as one `srun --overlap` step, one task per node, beside the training step; the batch script
asks this module to wait for their first readings and, after the run, to record and stop them.

    python -m harness.run.power.job wait RUN_DIR --nodes N --pid PID...
        exit 0 once every node's stream has its first reading; 2 when a BMC cannot be read, the
        one-line refusal appended to the run's stdout.log (nothing is trained then)
    python -m harness.run.power.job stop RUN_DIR --pid PID... --interval-s S --started-ms T --hostnames H...
        power/status.json (a node whose stream went silent before the stop died during the run);
        the script then stops the step by pid (kill -TERM: srun forwards it, each sampler takes
        its last reading) and waits for it, whatever this call did
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from harness.core.errors import ConfigError
from harness.run.power.capture import last_ms, wait_for_first_readings, write_status

SILENT_FOR_S = 3.0  # a stream whose last reading is older than this (and 3 intervals) has died


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.run.power.job")
    ap.add_argument("action", choices=["wait", "stop"])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--pid", type=int, nargs="+", required=True,
                    help="the sampler step's srun (per-node), or each sampler (central)")  # fmt: skip
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--interval-s", type=float, default=1.0)
    ap.add_argument("--started-ms", type=int, default=0)
    ap.add_argument("--hostnames", nargs="+", default=[], help="the job's nodes, in SLURM_NODEID order")
    a = ap.parse_args(argv)
    if a.action == "wait":
        try:
            wait_for_first_readings(
                a.run_dir, a.nodes, lambda i: None if any(map(_alive, a.pid)) else "(its process ended)"
            )
        except ConfigError as e:
            with open(a.run_dir / "stdout.log", "a") as out:
                out.write(f"error: {e}\n")
            return 2
        return 0
    now = time.time() * 1000
    silent = max(SILENT_FOR_S, 3 * a.interval_s) * 1000
    died = []
    for i in range(len(a.hostnames)):
        last = last_ms(a.run_dir, i)
        if last is None or now - last > silent or not any(map(_alive, a.pid)):
            died.append({"node": i, "returncode": "silent", "last_ms": last})
    write_status(a.run_dir, a.hostnames, a.started_ms, died)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
