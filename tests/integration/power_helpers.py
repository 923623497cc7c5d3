"""The loopback BMC for the power tests (tests/integration/test_power_capture.py, test_slurm.py):
started as a person starts it (.ci/bmc-up.sh) on free ports, stopped by pid (.ci/bmc-down.sh)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loopback_bmc(state: Path):
    """Generator for a fixture: yields {env, creds, watts, state}; skips when bmc-up cannot start."""
    env = dict(
        os.environ,
        BMC_CI_STATE=str(state),
        BMC_CI_IPMI_PORT=str(_free_port(socket.SOCK_DGRAM)),
        BMC_CI_REDFISH_PORT=str(_free_port(socket.SOCK_STREAM)),
        BMC_CI_WATTS="1000",
    )
    r = subprocess.run([str(REPO / ".ci/bmc-up.sh")], env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        pytest.skip(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "bmc-up failed")
    try:  # stopped by pid whatever happens from here on
        creds = dict(line.removeprefix("export ").split("=", 1) for line in r.stdout.splitlines())
        yield {"env": env, "creds": creds, "watts": state / "watts", "state": state}
    finally:
        subprocess.run([str(REPO / ".ci/bmc-down.sh")], env=env, timeout=30)
    assert not (state / "bmc.pid").exists()


def power_system(
    tmp_path: Path, bmc, base: str = "cpu-local-power", interval_s=0.05, source: dict | None = None
) -> Path:
    """`base` with cpu-local-power's power block pointed at this test's BMC, sampling every interval_s."""
    doc = yaml.safe_load((REPO / "systems" / f"{base}.yaml").read_text())
    power = yaml.safe_load((REPO / "systems/cpu-local-power.yaml").read_text())["power"]
    power["interval_s"] = interval_s
    power["source"].update(port=int(bmc["env"]["BMC_CI_IPMI_PORT"]), timeout_s=interval_s * 0.9)
    if source is not None:
        power["source"] = source
    doc["power"] = power
    path = tmp_path / f"{base}-power.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path
