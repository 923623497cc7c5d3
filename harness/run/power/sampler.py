"""One node's power sampler, a process of its own (started and stopped by capture.py):

    python -m harness.run.power.sampler --spec power.json --node 0 --hostname n1 --out node_0.raw.jsonl

Every `interval_s` on absolute monotonic deadlines (a sleep loop would drift by the read latency:
ipmitool takes 20-80 ms, more under load) it reads the node's power and appends one JSON line,
flushed at once:  {"t_ms": <time.time() in ms, the clock MLLOG stamps with>, "w": <watts>}.
A slot missed by a whole interval is skipped, never made up in a burst; a failed or timed-out
read is a line {"t_ms": ..., "error": "..."} (a gap the power lint reports). On SIGTERM or SIGINT
it takes one last reading (the window ends at a reading, not 0.2 s after one) and exits 0;
the same once --stop-file exists (a Slurm job's samplers: srun turns a SIGTERM into killing
the step, which would lose that last reading).

Exit codes: 0 stopped by a signal; 2 the first reading failed (bad credentials, no BMC, no
ipmitool, or PROBE_TRIES timeouts in a row): the stream's only line is then {"t_ms": ..., "fatal": "<source>: <cause>"}, which
capture.py relays as the run's one-line refusal (the sampler itself never prints).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from harness.core.power_stream import sidecar_of
from harness.resolve.power import Power

_WATTS = re.compile(r"Instantaneous power reading:\s*([0-9.]+)\s*Watts")


class ReadError(Exception):
    pass


class ReadTimeout(ReadError):
    """The source did not answer within source.timeout_s (a busy host, a BMC setting up a session)."""


PROBE_TRIES = 3
"""How often the first reading may time out before the run is refused. Nothing waits on it yet,
and a loaded host or a BMC's first lanplus session can miss the per-reading bound once (a suite
with two CPU hogs beside it missed 0.15 s here); an answer that refuses (credentials, no BMC) is
final at once."""


class Ipmi:
    """DCMI Get Power Reading through Debian's ipmitool, one call per reading (a persistent
    client stalls for 0.6-1.9 s now and then; a call costs ~28 ms of CPU)."""

    def __init__(self, power: Power, node: int, hostname: str):
        src = power.source
        self.timeout = src.timeout_s
        self.argv = ["ipmitool", "-I", src.interface]
        self.env = dict(os.environ)
        if src.interface == "lanplus":
            self.argv += ["-H", src.address(node, hostname), "-p", str(src.port or 623)]
            if src.cipher_suite is not None:
                self.argv += ["-C", str(src.cipher_suite)]
            if src.username_env:
                self.argv += ["-U", _credential(src.username_env)]
            if src.password_env:  # -E: from IPMI_PASSWORD, never on a command line `ps` shows
                self.env["IPMI_PASSWORD"] = _credential(src.password_env)
                self.argv.append("-E")
        self.argv += ["dcmi", "power", "reading"]
        lan = f"{src.address(node, hostname)}:{src.port or 623}"
        self.where = f"ipmi {src.interface} {lan if src.interface == 'lanplus' else 'in-band'}"

    def read(self) -> float:
        try:
            # a session of its own: a signal to the sampler's group must not kill the last read
            r = subprocess.run(
                self.argv,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                env=self.env,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise ReadError("ipmitool is not installed (Debian: apt-get install ipmitool)") from None
        except subprocess.TimeoutExpired:
            raise ReadTimeout(f"no answer within {self.timeout} s") from None
        m = _WATTS.search(r.stdout)
        if r.returncode != 0 or not m:
            said = (r.stderr.strip() or r.stdout.strip()).splitlines()
            raise ReadError(said[-1] if said else f"ipmitool exited {r.returncode}")
        return float(m[1])


class Redfish:
    """A GET of the configured resource through the `redfish` client, one session per sampler."""

    def __init__(self, power: Power, node: int, hostname: str):
        import redfish

        src = power.source
        port = f":{src.port}" if src.port else ""
        self.where = f"redfish {src.scheme}://{src.address(node, hostname)}{port}{src.resource}"
        self.resource, self.path = src.resource, [p for p in src.field.split("/") if p]
        try:
            self.client = redfish.redfish_client(
                base_url=f"{src.scheme}://{src.address(node, hostname)}{port}",
                username=_credential(src.username_env) if src.username_env else None,
                password=_credential(src.password_env) if src.password_env else None,
                default_prefix="/redfish/v1",
                timeout=src.timeout_s,
                max_retry=1,
            )
            self.client.login(auth="session")
        except Exception as e:  # noqa: BLE001 - the client's own classes; the cause is the answer
            raise ReadError(f"{type(e).__name__}: {e}") from None

    def read(self) -> float:
        try:
            r = self.client.get(self.resource)
        except Exception as e:  # noqa: BLE001
            raise ReadError(f"{type(e).__name__}: {e}") from None
        if r.status != 200:
            raise ReadError(f"HTTP {r.status}")
        value = r.dict
        try:
            for part in self.path:
                value = value[int(part)] if isinstance(value, list) else value[part]
            return float(value)
        except (KeyError, IndexError, ValueError, TypeError):
            raise ReadError(f"no number at {'/'.join(self.path)} in {self.resource}") from None


READERS = {"ipmi": Ipmi, "redfish": Redfish}


class Gpus:
    """NVML telemetry beside the node readings, never instead of them: each GPU's board power
    (nvmlDeviceGetPowerUsage, a 1 s average on Hopper) and energy counter (mJ since the driver
    loaded), written to the node's .gpu.jsonl sidecar. The board is not the node: these are for
    plausibility (node >= sum of its GPUs) and per-GPU energy, not for the power logs."""

    def __init__(self):
        self.handles, self.note = [], None
        try:
            import pynvml  # nvidia-ml-py
        except ImportError:
            self.note = "nvidia-ml-py is not installed: no GPU telemetry"
            return
        try:
            pynvml.nvmlInit()
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except pynvml.NVMLError as e:
            self.note = f"no NVIDIA driver here ({type(e).__name__}): no GPU telemetry"
            return
        self.nvml = pynvml
        if not self.handles:
            self.note = "NVML sees no GPU: no GPU telemetry"

    def line(self) -> dict | None:
        if not self.handles:
            return None
        n = self.nvml
        try:
            w = [n.nvmlDeviceGetPowerUsage(h) / 1000 for h in self.handles]
            j = [n.nvmlDeviceGetTotalEnergyConsumption(h) / 1000 for h in self.handles]
        except n.NVMLError as e:
            return {"t_ms": int(time.time() * 1000), "error": str(e)[:200]}
        return {"t_ms": int(time.time() * 1000), "w": w, "j": j}


def _credential(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise ReadError(f"environment variable {name} is not set (the BMC credential the descriptor names)")
    return value


def probe(reader) -> None:
    """The first reading, which proves the source before the run starts: up to PROBE_TRIES reads
    while they time out; any other ReadError (or the last timeout) is raised."""
    for attempt in range(1, PROBE_TRIES + 1):
        try:
            reader.read()
            return
        except ReadTimeout:
            if attempt == PROBE_TRIES:
                raise


def sample(reader, interval_s: float, out, stopping, gpus=None, gpu_out=None) -> None:
    """Read on absolute deadlines until stopping() is true, then once more."""
    t0 = time.monotonic()
    k = 0
    while not stopping():
        _read_one(reader, out, gpus, gpu_out)
        k += 1
        deadline = t0 + k * interval_s
        now = time.monotonic()
        if now > deadline:  # late by a whole slot or more: skip to the next one still ahead
            k = int((now - t0) / interval_s) + 1
            deadline = t0 + k * interval_s
        while not stopping() and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    _read_one(reader, out, gpus, gpu_out)


def _read_one(reader, out, gpus=None, gpu_out=None) -> None:
    try:
        w = reader.read()
        line = {"t_ms": int(time.time() * 1000), "w": w}
    except ReadError as e:
        line = {"t_ms": int(time.time() * 1000), "error": str(e)[:200]}
    out.write(json.dumps(line) + "\n")
    out.flush()
    gpu = gpus.line() if gpus is not None else None
    if gpu is not None:
        gpu_out.write(json.dumps(gpu) + "\n")
        gpu_out.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.run.power.sampler")
    ap.add_argument("--spec", required=True, type=Path, help="the descriptor's power block, as JSON")
    ap.add_argument("--node", type=int, default=0)
    ap.add_argument("--hostname", default="")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--stop-file", type=Path, help="stop (with a last reading) once this file exists")
    a = ap.parse_args(argv)
    power = Power.model_validate_json(a.spec.read_text())
    stop = {"now": False}

    def _stop(signum, frame):
        stop["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    with open(a.out, "a") as out:
        reader = None
        try:
            reader = READERS[power.source.kind](power, a.node, a.hostname)
            probe(reader)
        except ReadError as e:
            where = reader.where if reader is not None else power.source.kind
            fatal = {"t_ms": int(time.time() * 1000), "fatal": f"node {a.node} ({where}): {e}"}
            out.write(json.dumps(fatal) + "\n")
            return 2
        gpus = Gpus()
        with open(sidecar_of(a.out), "a") as gpu_out:
            if gpus.note:  # said once, in the sidecar: the run layer relays it
                gpu_out.write(json.dumps({"t_ms": int(time.time() * 1000), "note": gpus.note}) + "\n")
                gpu_out.flush()

            def stopping() -> bool:
                return stop["now"] or (a.stop_file is not None and a.stop_file.exists())

            sample(reader, power.interval_s, out, stopping, gpus, gpu_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
