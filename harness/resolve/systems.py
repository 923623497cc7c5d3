"""System descriptors: `systems/<name>.yaml` → a typed `SystemSpec`.

A descriptor is a superset of the official MLPerf system-description JSON (the 33 string fields
of `<org>/systems/<system>.json`) plus what the harness needs to plan and launch: node and
accelerator counts, accelerator peak throughput and memory, interconnect bandwidths, the
launcher and its settings. `export_official()` writes the official JSON; the descriptor's own
numbers (nodes, accelerators per node, memory) fill the matching official fields, so the two
can never disagree.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from harness.core.errors import ConfigError, suggest
from harness.core.schema import Strict, load_yaml, validate
from harness.resolve.power import Power

SYSTEMS_DIR = Path(__file__).resolve().parents[2] / "systems"

# The system-description checker (rulesets >= 4.0) accepts only these `status` values; logs use
# the short forms on the right (`submission_status`).
STATUS_TO_LOG = {
    "Available on-premise": "onprem",
    "Available cloud": "cloud",
    "Research, Development, or Internal (RDI)": "research",
    "Preview": "preview",
}


class Accelerator(Strict):
    model_name: str
    """Official `accelerator_model_name`, e.g. 'NVIDIA H100-SXM5-80GB'."""
    kind: Literal["gpu", "cpu"] = "gpu"
    """'cpu' runs over gloo with the megatron-core CPU compatibility layer; 'gpu' uses CUDA/NCCL."""
    memory_gib: float = Field(gt=0)
    """Device memory per accelerator in GiB (H100 SXM: 79.6 = 81559 MiB)."""
    memory_type: str = ""
    """Official `accelerator_memory_configuration`, e.g. 'HBM3'."""
    peak_tflops: dict[Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8"], float] = {}
    """Dense (no sparsity) peak TFLOP/s per precision, from the vendor datasheet."""
    interconnect: str = ""
    """Official `accelerator_interconnect`, e.g. 'NVLINK Gen4 900 GB/s + NVSWITCH Gen3'."""


class Host(Strict):
    processor_model: str = ""
    """Official `host_processor_model_name`; 'auto' reads /proc/cpuinfo at load time."""
    processors_per_node: int = Field(1, ge=1)
    core_count: int | Literal["auto"] = "auto"
    """Cores per processor; 'auto' = os.cpu_count() of the machine running the harness."""
    memory: str = ""
    """Official `host_memory_capacity`, e.g. '2.0 TB'; 'auto' reads /proc/meminfo."""
    storage_type: str = ""
    storage_capacity: str = ""
    networking: str = ""


class Container(Strict):
    """A container for the ranks, started by pyxis/enroot (`srun --container-*` flags)."""

    image: str
    """Image (`--container-image`): an enroot URI like 'nvcr.io/nvidia/pytorch:24.04-py3' or a
    squashfs path on the nodes."""
    mounts: list[str] = []
    """Bind mounts (`--container-mounts`), one `SRC:DST[:FLAGS]` each (flags joined by '+', e.g.
    'ro+rprivate'). The checkout, the run folders and the data folder are always mounted at
    their own paths, so plan.json's paths hold inside."""
    workdir: str = ""
    """Working directory inside the container (`--container-workdir`); empty = the checkout."""


class Launcher(Strict):
    kind: Literal["local", "torchrun", "slurm"] = "local"
    """How processes start: 'local' (one process), 'torchrun' (N per node), 'slurm' (sbatch/srun)."""
    partition: str = ""
    """Slurm partition (`--partition`); empty = the cluster default."""
    account: str = ""
    """Slurm account (`--account`); empty = none."""
    time_limit_min: int = Field(240, ge=1)
    """Wall-clock limit of one run, minutes (`--time`; an allocation running N runs in sequence
    asks for N times this)."""
    runs_as: Literal["sequence", "array"] = "sequence"
    """How `--runs N` is submitted on Slurm: 'sequence' = one allocation running the N runs one
    after another (as NVIDIA's run.sub: one wait in the queue); 'array' = a job array of N
    one-run jobs (`sbatch --array`), for clusters that limit job length or prefer small jobs."""
    container: Container | None = None
    """Run the ranks in this container (pyxis); absent = on the host."""
    env: dict[str, str] = {}
    """Environment for every rank (NCCL_*, UCX_*, CUDA_DEVICE_MAX_CONNECTIONS, ...)."""
    switches: int = Field(0, ge=0)
    """Slurm `--switches`: keep the job within this many leaf switches (0 = don't ask)."""
    racks: list[list[str]] = []
    """Hostnames grouped by rack/leaf switch, for topology-aware rank ordering."""
    node_tuning: list[str] = []
    """Commands that tune a node (e.g. 'nvidia-smi boost-slider --vboost 1'); shown, run only with --apply-tuning."""
    drop_caches: bool = False
    """The job may run `sync; sysctl vm.drop_caches=3` before each run (rules: clear caches)."""


class Description(Strict):
    """Official system-description fields that the harness does not derive itself."""

    host_processor_vcpu_count: str = ""
    host_processor_frequency: str = ""
    host_processor_caches: str = ""
    host_processor_interconnect: str = ""
    host_networking_topology: str = ""
    host_memory_configuration: str = ""
    accelerator_host_interconnect: str = ""
    accelerator_frequency: str = ""
    accelerator_on_chip_memories: str = Field("", alias="accelerator_on-chip_memories")
    accelerator_interconnect_topology: str = ""
    cooling: str = ""
    hw_notes: str = ""
    framework: str = ""
    other_software_stack: str | dict[str, str] = ""
    operating_system: str = ""
    sw_notes: str = ""

    model_config = Strict.model_config | {"populate_by_name": True}


class SystemSpec(Strict):
    name: str
    """System id = file name = `results/<org>/results/<name>/` and `systems/<name>.json`."""
    submitter: str
    """Official `submitter` / logged `submission_org`."""
    division: Literal["closed", "open"] = "closed"
    """Logged `submission_division`. Closed runs refuse overrides of fixed hyperparameters."""
    status: Literal[
        "Available on-premise", "Available cloud", "Research, Development, or Internal (RDI)", "Preview"
    ] = "Available on-premise"
    """Official availability; the log carries its short form (onprem/cloud/research/preview)."""
    system_name: str
    """Official human-readable `system_name`."""
    platform: str
    """Per-node platform name; logged as `submission_platform` = '<nodes>x<platform>'."""
    nodes: int = Field(ge=1)
    accelerators_per_node: int = Field(ge=1)
    """Accelerators (= training processes) per node. For CPU systems: processes per node."""
    scale_up_domain: int | None = Field(None, ge=1)
    """Accelerators sharing the fast intra-node fabric (NVLink domain); default = accelerators_per_node. GB200 NVL72: 72."""
    accelerator: Accelerator
    intra_node_bandwidth_gbs: float = Field(gt=0)
    """Per-accelerator one-direction bandwidth inside the scale-up domain, GB/s (NVLink4: 450)."""
    inter_node_bandwidth_gbs: float = Field(gt=0)
    """Per-accelerator one-direction bandwidth between nodes, GB/s (one 400 Gb/s NIC per GPU: 50)."""
    host: Host = Host()
    threads_per_process: int | Literal["auto"] = "auto"
    """torch intra-op threads per rank; 'auto' = cores / processes per node (at least 1)."""
    launcher: Launcher = Launcher()
    description: Description = Description()
    power: Power | None = None
    """MLPerf Power capture for every run (harness/resolve/power.py); absent = no measurement."""

    @field_validator("name")
    @classmethod
    def _name_is_an_id(cls, v: str) -> str:
        if not v or any(c in v for c in "/ \\"):
            raise ValueError("must be a non-empty id without '/', '\\' or spaces")
        return v

    @model_validator(mode="after")
    def _power_fits_the_nodes(self):
        if self.power is not None:
            self.power.check_nodes(self.nodes)
        return self

    # ---- derived values -------------------------------------------------------------------
    @property
    def world_size(self) -> int:
        return self.nodes * self.accelerators_per_node

    @property
    def domain_size(self) -> int:
        return self.scale_up_domain or self.accelerators_per_node

    @property
    def log_status(self) -> str:
        return STATUS_TO_LOG[self.status]

    @property
    def submission_platform(self) -> str:
        return f"{self.nodes}x{self.platform}"

    def threads(self) -> int:
        if self.threads_per_process != "auto":
            return self.threads_per_process
        return max(1, (os.cpu_count() or 1) // self.accelerators_per_node)

    def with_overrides(self, **fields: Any) -> SystemSpec:
        """A copy with some fields replaced, validated again (e.g. --nproc-per-node)."""
        data = self.model_dump(by_alias=True)
        data.update(fields)
        return validate(SystemSpec, data, f"system '{self.name}'")

    def export_official(self) -> dict[str, Any]:
        """The official system-description JSON: the 33 required fields, all strings."""
        d = self.description
        mem_mib = round(self.accelerator.memory_gib * 1024)
        return {
            "submitter": self.submitter,
            "division": self.division,
            "status": self.status,
            "system_name": self.system_name,
            "number_of_nodes": str(self.nodes),
            "host_processors_per_node": str(self.host.processors_per_node),
            "host_processor_model_name": self.host.processor_model,
            "host_processor_core_count": str(self.host.core_count),
            "host_processor_vcpu_count": d.host_processor_vcpu_count,
            "host_processor_frequency": d.host_processor_frequency,
            "host_processor_caches": d.host_processor_caches,
            "host_processor_interconnect": d.host_processor_interconnect,
            "host_memory_capacity": self.host.memory,
            "host_storage_type": self.host.storage_type,
            "host_storage_capacity": self.host.storage_capacity,
            "host_networking": self.host.networking,
            "host_networking_topology": d.host_networking_topology,
            "host_memory_configuration": d.host_memory_configuration,
            "accelerators_per_node": str(self.accelerators_per_node),
            "accelerator_model_name": self.accelerator.model_name,
            "accelerator_host_interconnect": d.accelerator_host_interconnect,
            "accelerator_frequency": d.accelerator_frequency,
            "accelerator_on-chip_memories": d.accelerator_on_chip_memories,
            "accelerator_memory_configuration": self.accelerator.memory_type,
            "accelerator_memory_capacity": f"{mem_mib} MiB",
            "accelerator_interconnect": self.accelerator.interconnect,
            "accelerator_interconnect_topology": d.accelerator_interconnect_topology,
            "cooling": d.cooling,
            "hw_notes": d.hw_notes,
            "framework": d.framework,
            "other_software_stack": d.other_software_stack,
            "operating_system": d.operating_system,
            "sw_notes": d.sw_notes,
        }


# ---- loading ---------------------------------------------------------------------------------
def _local_facts(data: dict[str, Any]) -> dict[str, Any]:
    """Fill 'auto' host facts from this machine (cpu-local is sized at run time)."""
    # a host/description that is not a mapping is left as it is: the model's validation names it
    host = dict(data["host"]) if isinstance(data.get("host"), dict) else {}
    if host.get("core_count") == "auto":
        host["core_count"] = os.cpu_count() or 1
    if host.get("processor_model") == "auto":
        host["processor_model"] = _cpu_model()
    if host.get("memory") == "auto":
        host["memory"] = _mem_total()
    if host:
        data = dict(data, host=host)
    desc = dict(data["description"]) if isinstance(data.get("description"), dict) else {}
    if desc.get("operating_system") == "auto":
        desc["operating_system"] = f"{platform.system()} {platform.release()}"
        data = dict(data, description=desc)
    return data


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_total() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return f"{int(line.split()[1]) / 1024**2:.1f} GB"
    except OSError:
        pass
    return ""


def available() -> list[str]:
    return sorted(p.stem for p in SYSTEMS_DIR.glob("*.yaml"))


def load_file(path: Path) -> SystemSpec:
    path = Path(path)
    data = _local_facts(load_yaml(path))
    return validate(SystemSpec, data, str(path))


def load(name_or_path: str) -> SystemSpec:
    """A shipped system by name, or a descriptor file by path."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        try:  # exists() is True for a FIFO or folder too: load_file says what it is
            found = p.exists()
            link = " (a broken or looping symlink)" if not found and p.is_symlink() else ""
        except (OSError, ValueError):  # a name too long for the filesystem, a NUL byte
            found, link = False, ""
        if not found:
            raise ConfigError(f"system file {name_or_path[:200]} does not exist{link}")
        return load_file(p)
    f = SYSTEMS_DIR / f"{name_or_path}.yaml"
    if name_or_path not in available():  # also for a name no file can have (too long, NUL)
        raise ConfigError(
            f"unknown system '{name_or_path[:80]}'{suggest(name_or_path[:80], available())}; "
            f"see `mlperf systems list` or pass a descriptor file"
        )
    spec = load_file(f)
    if spec.name != f.stem:
        raise ConfigError(f"{f}: field 'name' is '{spec.name}' but the file is named '{f.stem}.yaml'")
    return spec
