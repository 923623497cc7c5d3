import json
import subprocess
import sys

import pytest

from harness.core.errors import ConfigError
from harness.resolve import systems

SHIPPED = [
    "cpu-local",
    "dgx-h100x1",
    "dgx-h100x8",
    "dgx-h100x64",
    "dgx-h100x1452",
    "dgx-h200x1",
    "gb200-nvl72",
]


def test_required_systems_ship():
    assert set(SHIPPED) <= set(systems.available())


@pytest.mark.parametrize("name", SHIPPED)
def test_load_and_world_size(name):
    s = systems.load(name)
    assert s.world_size == s.nodes * s.accelerators_per_node
    assert s.submission_platform.startswith(f"{s.nodes}x")


def test_dgx_h100x64_is_512_gpus_and_1452_is_11616():
    assert systems.load("dgx-h100x64").world_size == 512
    assert systems.load("dgx-h100x1452").world_size == 11616


@pytest.mark.parametrize("name", SHIPPED)
def test_export_passes_official_system_description_checker(name, tmp_path):
    out = tmp_path / f"{name}.json"
    out.write_text(json.dumps(systems.load(name).export_official(), indent=4))
    r = subprocess.run(
        [sys.executable, "-m", "mlperf_logging.system_desc_checker", str(out), "training", "4.0.0"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    text = r.stdout + r.stderr
    assert "System description checker passed" in text, text


def test_export_fields_are_all_strings_but_software_stack():
    d = systems.load("dgx-h100x64").export_official()
    assert len(d) == 33
    assert all(isinstance(v, str) for k, v in d.items() if k != "other_software_stack")
    assert d["number_of_nodes"] == "64" and d["accelerators_per_node"] == "8"


def _write(tmp_path, text):
    p = tmp_path / "sys.yaml"
    p.write_text(text)
    return p


BASE = """name: x
submitter: Org
system_name: X
platform: P
nodes: 1
accelerators_per_node: 8
accelerator: {model_name: A, memory_gib: 80}
intra_node_bandwidth_gbs: 450
inter_node_bandwidth_gbs: 50
"""


def test_unknown_key_names_file_field_and_closest_key(tmp_path):
    p = _write(tmp_path, BASE + "acelerators_per_node: 8\n")
    with pytest.raises(ConfigError) as e:
        systems.load(str(p))
    msg = str(e.value)
    assert str(p) in msg and "acelerators_per_node" in msg and "did you mean 'accelerators_per_node'" in msg


def test_nested_unknown_key_suggests_from_nested_model(tmp_path):
    p = _write(tmp_path, BASE.replace("memory_gib: 80", "memory_gb: 80"))
    with pytest.raises(ConfigError, match=r"accelerator.memory_gb.*did you mean 'memory_gib'"):
        systems.load(str(p))


def test_wrong_type_and_malformed_yaml(tmp_path):
    with pytest.raises(ConfigError, match="field 'nodes'"):
        systems.load(str(_write(tmp_path, BASE.replace("nodes: 1", "nodes: many"))))
    with pytest.raises(ConfigError, match="malformed YAML"):
        systems.load(str(_write(tmp_path, BASE + "launcher: {kind: local\n")))


def test_unknown_system_suggests():
    with pytest.raises(ConfigError, match="did you mean 'dgx-h100x8'"):
        systems.load("dgx-h100x9")


def test_auto_threads_share_the_cores_among_the_accelerators(monkeypatch):
    """threads_per_process 'auto': the host's cores split evenly over the node's processes, at
    least one each, a whole number (torch.set_num_threads takes an int)."""
    spec = systems.load("dgx-h100x8").with_overrides(threads_per_process="auto")
    assert spec.accelerators_per_node == 8
    for cores, want in [(224, 28), (20, 2), (4, 1), (None, 1)]:
        monkeypatch.setattr(systems.os, "cpu_count", lambda c=cores: c)
        got = spec.threads()
        assert got == want and isinstance(got, int), (cores, got)
    one = systems.load("cpu-local").with_overrides(threads_per_process="auto")  # one process per node
    assert one.accelerators_per_node == 1 and one.threads() == 1  # cpu_count() still None: 1 thread


def test_an_override_keeps_every_other_field():
    spec = systems.load("dgx-h100x8")
    two = spec.with_overrides(nodes=2)
    assert two.nodes == 2 and two.model_dump(exclude={"nodes"}) == spec.model_dump(exclude={"nodes"})


@pytest.mark.parametrize("path", ["systems/" + "x" * 5000 + ".yaml", "systems/a\0b.yaml"])
def test_an_impossible_system_path_is_one_line(path):
    with pytest.raises(ConfigError, match=r"^system file .* does not exist$"):
        systems.load(path)


def test_host_facts_auto_without_a_cpu_count(monkeypatch):
    """os.cpu_count() may answer None: cpu-local's 'auto' core count is then 1, not an error."""
    monkeypatch.setattr(systems.os, "cpu_count", lambda: None)
    assert systems.load("cpu-local").host.core_count == 1


def test_an_accelerator_of_less_than_a_gib_is_valid_and_of_none_is_refused():
    spec = systems.load("cpu-local")
    acc = spec.accelerator.model_dump(by_alias=True)
    assert spec.with_overrides(accelerator=dict(acc, memory_gib=0.5)).accelerator.memory_gib == 0.5
    with pytest.raises(ConfigError, match="memory_gib"):
        spec.with_overrides(accelerator=dict(acc, memory_gib=0))
