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
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from harness.core.errors import ConfigError, suggest
from harness.core.schema import Strict, load_yaml, validate
from harness.resolve import system_search
from harness.resolve.power import Power
from harness.resolve.system_description import Description
from harness.resolve.system_export import official_json
from harness.resolve.systems_check import messages

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
    """Official `host_processors_per_node`: CPU sockets per node."""
    core_count: int | Literal["auto"] = "auto"
    """Cores per processor; 'auto' = os.cpu_count() of the machine running the harness."""
    memory: str = ""
    """Official `host_memory_capacity`, e.g. '2.0 TB'; 'auto' reads /proc/meminfo."""
    storage_type: str = ""
    """Official `host_storage_type`, e.g. 'NVMe SSD'."""
    storage_capacity: str = ""
    """Official `host_storage_capacity` per node, with units, e.g. '2x 1.92TB NVMe SSD'."""
    networking: str = ""
    """Official `host_networking`: the node's NICs, e.g. '8x ConnectX-7 IB NDR 400Gb/s'."""


class Container(Strict):
    """A container for the ranks, started by pyxis/enroot (`srun --container-*` flags)."""

    image: str
    """Image (`--container-image`): an enroot URI like 'nvcr.io/nvidia/pytorch:25.11-py3' or a
    squashfs path on the nodes. It must hold Python >= 3.12 (NGC PyTorch 25.01 and later), a CUDA
    torch and this harness's dependencies (`pip install --no-build-isolation -e '.[gpu]'`); the
    job installs nothing, it mounts the checkout and runs its code (`--dry-run` says so and warns
    about an NGC tag older than 25.01)."""
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
    """Wall-clock limit of ONE run, in minutes. A Slurm job running N runs in sequence asks for
    `--time` = N x this + 10 min setup (as NVIDIA's configs: WALLTIME = setup + NEXP x
    WALLTIME_MINUTES); each task of a job array for this + 10 min. `--dry-run` prints the sum."""
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
    drop_caches: bool | None = None
    """Drop the page cache on every node before each run (`sync; sysctl vm.drop_caches=3`, as
    root or with `sudo -n`, as NVIDIA's run.sub), because the MLPerf Training rules expect caches
    cleared before each run (timing rules; logged as `cache_clear`). Unset = on for GPU systems,
    off for CPU ones (dev boxes and CI: no root, a shared cache). A node that refuses makes the
    run log cache_clear false and say so; false = never tried, logged false."""


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
    """Nodes the runs use (official `number_of_nodes`); `--nodes N` on run/plan overrides it."""
    accelerators_per_node: int = Field(ge=1)
    """Accelerators (= training processes) per node. For CPU systems: processes per node."""
    scale_up_domain: int | None = Field(None, ge=1)
    """Accelerators sharing the fast intra-node fabric (NVLink domain); default = accelerators_per_node. GB200 NVL72: 72."""
    accelerator: Accelerator
    """The accelerator of every node (one model per system)."""
    intra_node_bandwidth_gbs: float = Field(gt=0)
    """Per-accelerator one-direction bandwidth inside the scale-up domain, GB/s (NVLink4: 450)."""
    inter_node_bandwidth_gbs: float = Field(gt=0)
    """Per-accelerator one-direction bandwidth between nodes, GB/s (one 400 Gb/s NIC per GPU: 50)."""
    host: Host = Host()
    """The host CPUs, memory, storage and network of one node."""
    threads_per_process: int | Literal["auto"] = "auto"
    """torch intra-op threads per rank; 'auto' = cores / processes per node (at least 1)."""
    launcher: Launcher = Launcher()
    """How the ranks are started (local, torchrun or Slurm) and with what environment."""
    description: Description = Description()
    """Official system-description text fields copied into the exported JSON."""
    power: Power | None = None
    """MLPerf Power capture for every run (harness/resolve/power.py); absent = no measurement."""
    tuned_config: str | None = None
    """A shipped system whose tuned per-benchmark configs this one runs (the file
    benchmarks/<bench>/configs/<tuned_config>.yaml) where none is named after this descriptor,
    e.g. 'dgx-h100x1' for your own 8x H100 node; absent = the planner's best layout. The layout is
    derived again at this system's nodes and accelerators."""

    @field_validator("name")
    @classmethod
    def _name_is_an_id(cls, v: str) -> str:
        if not v or any(c in v for c in "/ \\"):
            raise ValueError("must be a non-empty id without '/', '\\' or spaces")
        return v

    @field_validator("tuned_config")
    @classmethod
    def _tuned_config_is_shipped(cls, v: str | None) -> str | None:
        names = system_search.tuned_config_names()
        if v is not None and v not in names:
            raise ValueError(
                f"no benchmark ships a config '{v}'{suggest(v, names)}; shipped: {', '.join(names)}"
            )
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
        return official_json(self)


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
    """The shipped system names (the package's systems/)."""
    return sorted(p.stem for p in SYSTEMS_DIR.glob("*.yaml"))


def found() -> dict[str, list[Path]]:
    """Every name on the `--system` search path -> its files, the one used first (system_search)."""
    return system_search.all_found(SYSTEMS_DIR)


def load_file(path: Path) -> SystemSpec:
    """A descriptor file; its first problem is the one line, with how many more there are."""
    path = Path(path)
    data = _local_facts(load_yaml(path))
    try:
        return SystemSpec.model_validate(data)
    except ValidationError as err:
        lines = messages(err, SystemSpec, str(path))
        more = f" (+{len(lines) - 1} more: `mlperf systems validate {path}` lists all)"
        raise ConfigError(lines[0] + (more if len(lines) > 1 else "")) from None


def problems(path: Path) -> list[str]:
    """Every problem of a descriptor file, one line each (pydantic collects them all in one
    pass, unknown keys and the cross-field checks included); empty when it is valid."""
    try:
        data = _local_facts(load_yaml(Path(path)))
    except ConfigError as e:  # unreadable or not YAML: nothing further can be checked
        return [str(e)]
    try:
        SystemSpec.model_validate(data)
    except ValidationError as err:
        return messages(err, SystemSpec, str(path))
    return []


def source_note(name_or_path: str) -> str | None:
    """Which file a name meant, when not simply the shipped one (system_search.source_note)."""
    return system_search.source_note(name_or_path, SYSTEMS_DIR)


def load(name_or_path: str) -> SystemSpec:
    """A descriptor by name (the search path: ./systems, $MLPERF_SYSTEMS_PATH, the shipped
    systems/; system_search.py) or by file path."""
    p = Path(name_or_path)
    if system_search.is_path(name_or_path):
        try:  # exists() is True for a FIFO or folder too: load_file says what it is
            exists = p.exists()
            link = " (a broken or looping symlink)" if not exists and p.is_symlink() else ""
        except (OSError, ValueError):  # a name too long for the filesystem, a NUL byte
            exists, link = False, ""
        if not exists:
            raise ConfigError(f"system file {name_or_path[:200]} does not exist{link}")
        return load_file(p)
    hits = system_search.candidates(name_or_path, SYSTEMS_DIR)
    scaled = SCALED.match(name_or_path)
    if not hits and scaled and system_search.candidates(scaled["base"], SYSTEMS_DIR):
        return at_nodes(load(scaled["base"]), int(scaled["nodes"]))
    if not hits:  # also for a name no file can have (too long, NUL)
        name = name_or_path[:80]
        raise ConfigError(
            f"unknown system '{name}'{suggest(name, found())}; looked in "
            f"{system_search.looked_in(SYSTEMS_DIR)}; see `mlperf systems list` or pass a descriptor file"
        )
    f = hits[0]
    spec = load_file(f)
    if spec.name != f.stem:
        raise ConfigError(f"{f}: field 'name' is '{spec.name}' but the file is named '{f.stem}.yaml'")
    return spec


# `--nodes N` runs a descriptor at another scale under its own system name, NAME-nN: a submission's
# system JSON states one node count, so runs at 16 and 64 nodes may not share a result folder (the
# committee's check of the logs' "16x..." platform against `number_of_nodes` would fail one of them).
SCALED = re.compile(r"^(?P<base>.+)-n(?P<nodes>[1-9][0-9]{0,5})$")


def at_nodes(spec: SystemSpec, nodes: int) -> SystemSpec:
    """`spec` at `nodes` nodes, named NAME-nN (what `load` reads back, e.g. for `--resume`)."""
    return spec.with_overrides(nodes=nodes, name=f"{spec.name}-n{nodes}")
