"""A descriptor as the official MLPerf system-description JSON (`<org>/systems/<system>.json`).

The descriptor's own numbers (nodes, accelerators per node, memory) fill the matching official
fields, so the two can never disagree. Apart from systems.py (the model) to keep that module small.
"""

from __future__ import annotations

from typing import Any


def official_json(spec: Any) -> dict[str, Any]:
    """The 33 required fields, all strings but `other_software_stack` (a SystemSpec's export)."""
    d = spec.description
    mem_mib = round(spec.accelerator.memory_gib * 1024)
    return {
        "submitter": spec.submitter,
        "division": spec.division,
        "status": spec.status,
        "system_name": spec.system_name,
        "number_of_nodes": str(spec.nodes),
        "host_processors_per_node": str(spec.host.processors_per_node),
        "host_processor_model_name": spec.host.processor_model,
        "host_processor_core_count": str(spec.host.core_count),
        "host_processor_vcpu_count": d.host_processor_vcpu_count,
        "host_processor_frequency": d.host_processor_frequency,
        "host_processor_caches": d.host_processor_caches,
        "host_processor_interconnect": d.host_processor_interconnect,
        "host_memory_capacity": spec.host.memory,
        "host_storage_type": spec.host.storage_type,
        "host_storage_capacity": spec.host.storage_capacity,
        "host_networking": spec.host.networking,
        "host_networking_topology": d.host_networking_topology,
        "host_memory_configuration": d.host_memory_configuration,
        "accelerators_per_node": str(spec.accelerators_per_node),
        "accelerator_model_name": spec.accelerator.model_name,
        "accelerator_host_interconnect": d.accelerator_host_interconnect,
        "accelerator_frequency": d.accelerator_frequency,
        "accelerator_on-chip_memories": d.accelerator_on_chip_memories,
        "accelerator_memory_configuration": spec.accelerator.memory_type,
        "accelerator_memory_capacity": f"{mem_mib} MiB",
        "accelerator_interconnect": spec.accelerator.interconnect,
        "accelerator_interconnect_topology": d.accelerator_interconnect_topology,
        "cooling": d.cooling,
        "hw_notes": d.hw_notes,
        "framework": d.framework,
        "other_software_stack": d.other_software_stack,
        "operating_system": d.operating_system,
        "sw_notes": d.sw_notes,
    }
