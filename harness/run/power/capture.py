"""Start and stop one run's power samplers (sampler.py), one process per node.

    with Capture(system.power, run_dir, hostnames) as cap:   # samplers up, first reading taken
        ...start the ranks, wait for them...                   # any exit path: stopped by pid
    # run_dir/power/node_<i>.raw.jsonl (the raw streams), run_dir/power/status.json

`start` refuses in one line (ConfigError, exit 2) when a source cannot be read at all: bad
credentials, no BMC, no ipmitool; nothing has been trained then. A sampler that dies *during*
the run does not fail it: `stop` records which one and when in status.json, and the result is
claimed without energy (files.py says why in one line).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.core.errors import ConfigError
from harness.core.files import atomic_write
from harness.core.power_stream import lines, raw_path
from harness.resolve.power import Power

FIRST_READING_S = 15.0  # an ipmitool call on a busy BMC can take seconds; its timeout_s bounds each try
STATUS = "status.json"


class Capture:
    def __init__(self, power: Power, run_dir: Path, hostnames: list[str], env: dict | None = None):
        self.power, self.dir, self.hostnames, self.env = power, Path(run_dir) / "power", hostnames, env
        self.procs: list[subprocess.Popen] = []
        self.started_ms = 0

    def __enter__(self) -> Capture:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        spec = self.dir / "power.json"
        atomic_write(spec, self.power.model_dump_json(indent=1))
        self.started_ms = int(time.time() * 1000)
        for i, host in enumerate(self.hostnames):
            raw = raw_path(self.dir.parent, i)
            raw.unlink(missing_ok=True)  # a retried run starts its stream afresh
            argv = [sys.executable, "-m", "harness.run.power.sampler", "--spec", str(spec),
                    "--node", str(i), "--hostname", host, "--out", str(raw)]  # fmt: skip
            with open(self.dir / f"sampler_{i}.log", "ab") as log:
                self.procs.append(
                    subprocess.Popen(
                        argv, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
                    )
                )
        try:
            self._wait_for_first_readings()
        except BaseException:
            self.stop()
            raise

    def _wait_for_first_readings(self) -> None:
        wait_for_first_readings(self.dir.parent, len(self.procs), lambda i: self.procs[i].poll())

    def stop(self) -> None:
        """Stop every sampler by pid (SIGTERM: it takes one last reading; SIGKILL after 5 s) and
        record in status.json any that had died before."""
        died = []
        for i, p in enumerate(self.procs):
            rc = p.poll()
            if rc is not None:
                died.append({"node": i, "returncode": rc, "last_ms": last_ms(self.dir.parent, i)})
                continue
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.procs:
            write_status(self.dir.parent, self.hostnames, self.started_ms, died)
        self.procs = []


def wait_for_first_readings(run_dir: Path, nodes: int, exited) -> None:
    """Until every node's stream has its first line; ConfigError (one line) on a refusal, on a
    sampler that ended first (`exited(i)` its return code, None while it runs) or after
    FIRST_READING_S."""
    end = time.monotonic() + FIRST_READING_S
    waiting = set(range(nodes))
    while waiting:
        for i in sorted(waiting):
            first = _first_line(raw_path(run_dir, i))
            if first is not None and "fatal" in first:
                raise ConfigError(f"power: {first['fatal']}; fix the system's power.source or its BMC")
            if first is not None:
                waiting.discard(i)
            elif (rc := exited(i)) is not None:
                log = Path(run_dir, "power", f"sampler_{i}.log")
                said = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
                raise ConfigError(
                    f"power: the sampler of node {i} exited {rc} before its first reading "
                    f"({said[-1] if said else 'no output'})"
                )
        if waiting and time.monotonic() > end:
            raise ConfigError(
                f"power: no reading from node(s) {sorted(waiting)} within {FIRST_READING_S:.0f} s; "
                "is the BMC reachable?"
            )
        time.sleep(0.05)


def write_status(run_dir: Path, hostnames: list[str], started_ms: int, died: list[dict]) -> None:
    """power/status.json: the nodes' names (in node order) and the samplers that died before the
    stop ({node, returncode, last_ms}); files.py reads it after the run."""
    status = {
        "hostnames": hostnames,
        "started_ms": started_ms,
        "stopped_ms": int(time.time() * 1000),
        "died": died,
    }
    atomic_write(Path(run_dir) / "power" / STATUS, json.dumps(status, indent=1) + "\n")


def last_ms(run_dir: Path, node: int) -> int | None:
    """The time of the node's last reading (None: none)."""
    return max((r["t_ms"] for r in lines(raw_path(run_dir, node)) if "w" in r), default=None)


def _first_line(path: Path) -> dict | None:
    found = lines(path)
    return found[0] if found else None
