"""The `power:` block of a system descriptor: where each node's power is read, how often, and
what the MLPerf Power logs say about it (rules: mlcommons/training_policies
power_measurement.adoc; what the harness does with it: harness/run/power/).

    power:
      interval_s: 0.25            # 4 readings a second (rules: at least 1)
      measurement_type: AC        # a BMC reads the PSU's AC input ...
      conversion_eff: 0.94        # ... so the log carries the supply's efficiency
      source:
        kind: ipmi                # ipmi (DCMI Get Power Reading) | redfish (also a PDU outlet)
        interface: lanplus        # ipmi: 'open' = in-band (/dev/ipmi0, root), 'lanplus' = over the network
        host: bmc-{node}          # {node} = the node's hostname; a list = one BMC per node
        port: 623
        cipher_suite: 3
        username_env: MLPERF_BMC_USER      # the credentials' *variable names*, never the values
        password_env: MLPERF_BMC_PASSWORD
      interconnect:               # estimated switch power, one sw_<j>.txt each
        - {max_w: 1500, share: 0.25}

Credentials never sit in the file: the sampler reads them from the named variables at run time
and refuses in one line when one is unset.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from harness.core.schema import Strict

REDFISH_POWER = "/redfish/v1/Chassis/1/Power"


class PowerSource(Strict):
    """Where a node's power is read."""

    kind: Literal["ipmi", "redfish"]
    """'ipmi': DCMI Get Power Reading through Debian's `ipmitool` (one call per reading);
    'redfish': a GET of `resource` through the `redfish` client (a BMC, or a PDU outlet exposed
    as a Redfish PowerEquipment resource)."""
    interface: Literal["open", "lanplus"] = "lanplus"
    """ipmi only: 'open' reads the local BMC in-band (needs ipmi_si/ipmi_devintf and root, or
    /dev/ipmi0 mounted into the container); 'lanplus' reads it over RMCP+ at `host`."""
    host: str | list[str] = ""
    """BMC (or PDU) address: one for all nodes with '{node}' standing for the node's hostname
    (e.g. 'bmc-{node}'), or a list with one address per node, in node order. Unused for 'open'."""
    port: int = Field(0, ge=0, le=65535)
    """Port; 0 = the protocol's default (623 for IPMI, 443 for Redfish over https)."""
    scheme: Literal["https", "http"] = "https"
    """redfish only: the URL scheme ('http' only for a loopback test service)."""
    cipher_suite: int | None = Field(None, ge=0, le=17)
    """ipmi lanplus: RMCP+ cipher suite (`ipmitool -C`); None = ipmitool's default."""
    username_env: str = ""
    """Name of the environment variable holding the BMC user (empty: none, e.g. in-band)."""
    password_env: str = ""
    """Name of the environment variable holding the BMC password (passed to ipmitool as
    IPMI_PASSWORD with -E, never on its command line)."""
    resource: str = REDFISH_POWER
    """redfish: the resource to GET, e.g. '/redfish/v1/Chassis/1/Power' (PowerControl) or, on
    newer BMCs, '/redfish/v1/Chassis/1/EnvironmentMetrics'; a PDU outlet:
    '/redfish/v1/PowerEquipment/RackPDUs/1/Outlets/A1'."""
    field: str = "PowerControl/0/PowerConsumedWatts"
    """redfish: where the watts are in that resource, as a '/'-separated path ('PowerWatts/Reading'
    for EnvironmentMetrics and PDU outlets)."""
    timeout_s: float = Field(0.8, gt=0)
    """Per-reading timeout: a reading that takes longer is skipped (a gap the lint reports),
    so one stalled BMC call never delays the next slot. Keep it below interval_s."""

    @model_validator(mode="after")
    def _needs_a_host(self):
        if self.kind == "redfish" or self.interface == "lanplus":
            if not self.host:
                raise ValueError("'host' is required (the BMC or PDU address) for this source")
        if self.kind == "redfish" and self.interface == "open":
            raise ValueError("interface 'open' is IPMI's in-band path; a Redfish source has none")
        return self

    def address(self, node_index: int, hostname: str) -> str:
        """The BMC address of one node."""
        if isinstance(self.host, list):
            return self.host[node_index]
        return self.host.replace("{node}", hostname)


class Interconnect(Strict):
    """One switch (or a group of them) whose power is estimated, not measured: sw_<j>.txt."""

    max_w: float = Field(gt=0)
    """The switch's maximum specified power, W (datasheet)."""
    share: float = Field(1.0, gt=0, le=1)
    """The fraction of it this system uses (provisioning: its ports used / all ports)."""

    @property
    def estimate_w(self) -> float:
        return self.max_w * self.share


class Power(Strict):
    """MLPerf Power capture for every run on this system (absent: no power measurement)."""

    source: PowerSource
    interval_s: float = Field(1.0, gt=0, le=1)
    """Seconds between readings, on absolute deadlines (rules: at least one reading a second)."""
    measurement_type: Literal["AC", "DC"] = "AC"
    """Where the power is measured: 'AC' at the supply's input (BMCs, PDUs), 'DC' at its output."""
    conversion_eff: float = Field(1.0, gt=0, le=1)
    """Logged as conversion_eff with measurement_type; the official summarizer multiplies each
    node's energy by it."""
    sampler: Literal["per-node", "central"] = "per-node"
    """'per-node': one sampler on each node of the job (in-band reads need that); 'central': one
    process on the launch host reads every node's BMC over the network."""
    interconnect: list[Interconnect] = []
    """Estimated switch power, one sw_<j>.txt per entry, in every run."""

    @model_validator(mode="after")
    def _consistent(self):
        if self.source.timeout_s > self.interval_s:
            raise ValueError(
                f"source.timeout_s {self.source.timeout_s} exceeds interval_s {self.interval_s}: "
                "a stalled read would push the next slot; set it below the interval"
            )
        if self.sampler == "central" and self.source.kind == "ipmi" and self.source.interface == "open":
            raise ValueError("an in-band ('open') IPMI source needs sampler 'per-node'")
        return self

    def describe(self) -> str:
        """One line for --dry-run."""
        src = self.source
        if src.kind == "ipmi":
            where = "in-band" if src.interface == "open" else f"lanplus {src.host}:{src.port or 623}"
            how = f"ipmitool dcmi power reading ({where})"
        else:
            how = f"redfish {src.scheme}://{src.host}{':' + str(src.port) if src.port else ''}{src.resource} {src.field}"
        creds = ", ".join(v for v in (src.username_env, src.password_env) if v) or "none"
        sw = (
            f"; {len(self.interconnect)} switch estimate(s), {sum(i.estimate_w for i in self.interconnect):g} W"
            if self.interconnect
            else ""
        )
        return (
            f"{how} every {self.interval_s:g} s ({self.sampler}), {self.measurement_type}, conversion_eff "
            f"{self.conversion_eff:g}, credentials from ${{{creds}}}{sw}"
        )

    def check_nodes(self, nodes: int) -> None:
        """A per-node address list must have one entry per node (raises ValueError)."""
        if isinstance(self.source.host, list) and len(self.source.host) != nodes:
            raise ValueError(
                f"power.source.host lists {len(self.source.host)} address(es) for {nodes} node(s)"
            )
