"""The official system-description fields a descriptor states as text (`description:` block).

The harness derives the other official fields from the descriptor's typed values (systems.py
export_official); these it copies as written into `<org>/systems/<system>.json`. Their meanings
follow the MLPerf Training submission rules' system-description table; all are free text.
"""

from __future__ import annotations

from pydantic import Field

from harness.core.schema import Strict


class Description(Strict):
    """Official system-description fields that the harness does not derive itself."""

    host_processor_vcpu_count: str = ""
    """Official `host_processor_vcpu_count`: logical CPUs (hardware threads) per processor, e.g. '112'."""
    host_processor_frequency: str = ""
    """Official `host_processor_frequency`, with its unit, e.g. '2000 MHz'."""
    host_processor_caches: str = ""
    """Official `host_processor_caches`, e.g. 'L1d 48 KiB, L2 2 MiB, L3 105 MiB per processor'."""
    host_processor_interconnect: str = ""
    """Official `host_processor_interconnect` between the host processors, e.g. '4x UPI 16 GT/s'."""
    host_networking_topology: str = ""
    """Official `host_networking_topology` of the nodes' network, e.g. 'Rail-optimized fat tree'."""
    host_memory_configuration: str = ""
    """Official `host_memory_configuration`, e.g. '32x 64 GB DDR5-4800'."""
    accelerator_host_interconnect: str = ""
    """Official `accelerator_host_interconnect` (accelerator to host), e.g. 'PCIe Gen5 x16'."""
    accelerator_frequency: str = ""
    """Official `accelerator_frequency`, with its unit, e.g. '1980 MHz'."""
    accelerator_on_chip_memories: str = Field("", alias="accelerator_on-chip_memories")
    """Official `accelerator_on-chip_memories` (written with the hyphen in YAML), e.g. '50 MB L2'."""
    accelerator_interconnect_topology: str = ""
    """Official `accelerator_interconnect_topology` inside a node, e.g. 'NVSwitch all-to-all'."""
    cooling: str = ""
    """Official `cooling`, e.g. 'Air' or 'Liquid'."""
    hw_notes: str = ""
    """Official `hw_notes`: anything else about the hardware a reader needs."""
    framework: str = ""
    """Official `framework` the runs use, with versions, e.g. 'PyTorch 2.6 + megatron-core 0.12'."""
    other_software_stack: str | dict[str, str] = ""
    """Official `other_software_stack`: text, or a mapping of component to version (cuda_version: '12.4')."""
    operating_system: str = ""
    """Official `operating_system`, e.g. 'Ubuntu 22.04.4 LTS'; 'auto' reads this machine's at load time."""
    sw_notes: str = ""
    """Official `sw_notes`: anything else about the software a reader needs."""

    model_config = Strict.model_config | {"populate_by_name": True}
