"""System descriptors (harness/resolve/systems.py) where bench/mutation.py found nothing pinned:
the official JSON `mlperf systems export` writes, the defaults and bounds a descriptor may use,
the machine's own facts behind `auto`, the threads per rank, and how a system is found."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import pytest
import yaml

from harness.core.errors import ConfigError
from harness.resolve import systems

MINIMAL = {
    "name": "box",
    "submitter": "Org",
    "system_name": "Box",
    "platform": "Box",
    "nodes": 2,
    "accelerators_per_node": 4,
    "accelerator": {"model_name": "NVIDIA H100-SXM5-80GB", "memory_gib": 79.6474609375},
    "intra_node_bandwidth_gbs": 450,
    "inter_node_bandwidth_gbs": 50,
}


def _load(tmp_path: Path, **changes) -> systems.SystemSpec:
    p = tmp_path / "box.yaml"
    p.write_text(yaml.safe_dump({**MINIMAL, **changes}))
    return systems.load(str(p))


def test_the_official_json_of_a_minimal_descriptor(tmp_path):
    out = _load(tmp_path).export_official()
    assert (out["division"], out["status"]) == ("closed", "Available on-premise")
    assert (out["number_of_nodes"], out["accelerators_per_node"]) == ("2", "4")
    assert out["host_processors_per_node"] == "1"
    assert out["accelerator_memory_capacity"] == "81559 MiB"  # 79.647 GiB x 1024, rounded
    launcher = _load(tmp_path).launcher
    assert (launcher.kind, launcher.time_limit_min, launcher.switches, launcher.drop_caches) == (
        "local",
        240,
        0,
        None,  # unset: on for GPU systems, off for CPU ones (harness/run/launch/jobinfo.py)
    )


@pytest.mark.parametrize(
    "changes,ok",
    [
        ({"scale_up_domain": 1}, True),
        ({"scale_up_domain": 0}, False),
        ({"intra_node_bandwidth_gbs": 0.5}, True),
        ({"intra_node_bandwidth_gbs": 0}, False),
        ({"launcher": {"kind": "slurm", "time_limit_min": 1, "switches": 0}}, True),
        ({"launcher": {"kind": "slurm", "time_limit_min": 0}}, False),
        ({"launcher": {"kind": "slurm", "switches": -1}}, False),
        ({"host": {"processors_per_node": 0}}, False),
        ({"name": "my box"}, False),
        ({"name": "a/b"}, False),
        ({"description": {"accelerator_on_chip_memories": "50 MB L2"}}, True),  # the Python name too
    ],
)
def test_what_a_descriptor_may_say(tmp_path, changes, ok):
    if ok:
        spec = _load(tmp_path, **changes)
        if "description" in changes:
            assert spec.export_official()["accelerator_on-chip_memories"] == "50 MB L2"
        assert spec.with_overrides(accelerators_per_node=2).world_size == 4  # and survives a copy
    else:
        with pytest.raises(ConfigError):
            _load(tmp_path, **changes)


def test_a_name_must_be_an_id(tmp_path):
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, name="my box")
    assert str(e.value).endswith("field 'name': must be a non-empty id without '/', '\\' or spaces")


def test_threads_per_rank(tmp_path):
    assert _load(tmp_path, threads_per_process=3).threads() == 3
    cores = os.cpu_count() or 1
    assert _load(tmp_path, accelerators_per_node=1).threads() == cores  # 'auto': the cores per rank
    assert _load(tmp_path, accelerators_per_node=8 * cores).threads() == 1  # at least one


def test_auto_fields_are_this_machines_facts():
    spec = systems.load("cpu-local")
    info = Path("/proc/cpuinfo").read_text()
    model = next(ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name"))
    kib = next(
        int(ln.split()[1])
        for ln in Path("/proc/meminfo").read_text().splitlines()
        if ln.startswith("MemTotal")
    )
    out = spec.export_official()
    assert out["host_processor_core_count"] == str(os.cpu_count())
    assert out["host_processor_model_name"] == model
    assert out["host_memory_capacity"] == f"{kib / 1024**2:.1f} GB"
    assert out["operating_system"] == f"{platform.system()} {platform.release()}"


def test_the_cpu_model_where_proc_says_more_or_nothing(monkeypatch, tmp_path):
    fake = tmp_path / "cpuinfo"

    class FakeProc(type(Path())):
        def read_text(self, *a, **k):
            return fake.read_text() if str(self) == "/proc/cpuinfo" else super().read_text(*a, **k)

    monkeypatch.setattr(systems, "Path", FakeProc)
    fake.write_text("processor\t: 0\nmodel name\t: Vendor CPU: rev 2 @ 2.0GHz\n")
    assert systems._cpu_model() == "Vendor CPU: rev 2 @ 2.0GHz"  # a ':' in the name is kept
    fake.write_text("processor\t: 0\n")  # no model name (an ARM board): what platform says
    assert systems._cpu_model() == (platform.processor() or platform.machine())


def test_how_a_system_is_found(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"^system file nowhere\.yaml does not exist$"):
        systems.load("nowhere.yaml")  # a .yaml is a path, not a name
    with pytest.raises(ConfigError, match=r"^system file .*nowhere does not exist$"):
        systems.load(str(tmp_path / "nowhere"))  # a path with a separator, without .yaml
    os.symlink("gone.yaml", tmp_path / "link.yaml")
    with pytest.raises(ConfigError, match=r"does not exist \(a broken or looping symlink\)$"):
        systems.load(str(tmp_path / "link.yaml"))
    with pytest.raises(ConfigError, match=r"^system file .* does not exist$"):
        systems.load(str(tmp_path / "nul\0.yaml"))
    (tmp_path / "box.yaml").write_text(yaml.safe_dump({**MINIMAL, "name": "other"}))
    monkeypatch.setattr(systems, "SYSTEMS_DIR", tmp_path)
    with pytest.raises(ConfigError, match=r"field 'name' is 'other' but the file is named 'box\.yaml'$"):
        systems.load("box")
