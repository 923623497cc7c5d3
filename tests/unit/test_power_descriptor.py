"""The `power:` block of a system descriptor (harness/resolve/power.py) and the torch-free parts
of power mode: validation in one line naming the field, what --dry-run and the plan carry, the
refusals, the measurement window of harness/run/power/files.py and the count the training loop
waits on (harness/train/runtime.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from harness.core.errors import ConfigError
from harness.resolve import systems

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "systems" / "cpu-local-power.yaml"


def _variant(tmp_path, **power) -> Path:
    doc = yaml.safe_load(SHIPPED.read_text())
    for key, value in power.items():
        if key.startswith("source_"):
            doc["power"]["source"][key.removeprefix("source_")] = value
        else:
            doc["power"][key] = value
    path = tmp_path / "sys.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_shipped_power_system_loads_and_names_its_credentials_by_variable():
    p = systems.load("cpu-local-power").power
    assert p.source.kind == "ipmi" and p.source.interface == "lanplus" and p.source.port == 6230
    assert (p.source.username_env, p.source.password_env) == ("MLPERF_BMC_USER", "MLPERF_BMC_PASSWORD")
    assert p.interval_s <= 1 and p.source.timeout_s < p.interval_s
    assert [i.estimate_w for i in p.interconnect] == [50.0]
    assert systems.load("cpu-local").power is None


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"source_timeout_s": 0.5}, "field 'power': source.timeout_s 0.5 exceeds interval_s"),
        ({"source_host": ""}, "field 'power.source': 'host' is required"),
        ({"interval_s": 2}, "field 'power.interval_s'"),
        ({"conversion_eff": 1.3}, "field 'power.conversion_eff'"),
        ({"source_password": "hunter2"}, "unknown key 'power.source.password'"),
        ({"source_host": ["a", "b"]}, "power.source.host lists 2 address(es) for 1 node(s)"),
        ({"sampler": "central", "source_interface": "open"}, "needs sampler 'per-node'"),
    ],
)
def test_a_bad_power_block_is_one_line_naming_the_field(tmp_path, change, says):
    with pytest.raises(ConfigError) as e:
        systems.load(str(_variant(tmp_path, **change)))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_dry_run_shows_the_block_and_the_plan_asks_for_60_readings(mlperf):
    r = mlperf("run", "gpt3", "--system", "cpu-local-power", "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["power"]["source"]["host"] == "127.0.0.1" and doc["plan"]["power_min_readings"] == 60
    plain = json.loads(mlperf("run", "gpt3", "--dry-run", "--json").stdout)
    assert plain["power"] is None and plain["plan"]["power_min_readings"] == 0
    text = mlperf("run", "gpt3", "--system", "cpu-local-power", "--dry-run").stdout
    assert "power: ipmitool dcmi power reading (lanplus 127.0.0.1:6230) every 0.2 s" in " ".join(text.split())


def test_a_benchmark_whose_loop_ends_at_run_stop_is_told_what_a_short_run_gets(mlperf):
    """gnn has no training-on after run_stop: power mode runs it, and --dry-run says that a run
    shorter than the rules' 60 readings is claimed without energy (files.write's line)."""
    r = mlperf("run", "gnn", "--system", "cpu-local-power", "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["plan"]["power_min_readings"] == 60
    (note,) = [n for n in doc["notes"] if n.startswith("power:")]
    assert "gnn's loop ends at run_stop" in note and "(12 s at interval_s 0.2)" in note
    gpt3 = json.loads(mlperf("run", "gpt3", "--system", "cpu-local-power", "--dry-run", "--json").stdout)
    assert not [n for n in gpt3["notes"] if n.startswith("power:")]  # gpt3 trains on


def test_the_window_starts_and_ends_at_readings_around_the_loop():
    from harness.run.power.files import window

    stream = [(t, 100.0) for t in range(0, 10_000, 200)]
    w = window(stream, run_start=1_050, loop_end=5_010)
    assert w[0][0] == 1_000 and w[-1][0] == 5_200  # the reading before run_start, the one after the loop
    assert window(stream, run_start=-5, loop_end=5_000) is None  # no reading before run_start
    assert window(stream, run_start=1_000, loop_end=20_000) is None  # none after the loop


def test_the_loop_waits_on_the_fewest_readings_and_not_on_a_silent_sampler(tmp_path):
    from harness.train.runtime import SILENT_S, _fewest_readings

    now = int(time.time() * 1000)
    power = tmp_path / "power"
    power.mkdir()
    (power / "node_0.raw.jsonl").write_text(
        "".join(json.dumps({"t_ms": now - 1000 + i * 10, "w": 1.0}) + "\n" for i in range(70))
    )
    (power / "node_1.raw.jsonl").write_text(
        json.dumps({"t_ms": now - 900, "error": "timeout"})
        + "\n"
        + json.dumps({"t_ms": now - 800, "w": 2.0})
        + "\n"
    )
    fewest, silent = _fewest_readings(tmp_path, since_ms=now - 2000)
    assert fewest == 1 and silent < SILENT_S  # node 1 decides; a failed read is no reading
    assert _fewest_readings(tmp_path, since_ms=now)[0] == 0
    assert _fewest_readings(tmp_path / "none", since_ms=0) == (0, float("inf"))


def _stream(path: Path, recs: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_gpu_telemetry_counts_node_readings_below_the_gpus_and_says_when_there_is_none(tmp_path):
    """The plausibility check: a node cannot draw less than its GPUs' boards. A BMC reading one
    PSU of two (half the node) reads below them; the sidecar's counters give the GPUs' energy."""
    from harness.core.power_stream import gpu_path, gpu_telemetry, raw_path

    node = [{"t_ms": t, "w": 900.0 if t < 3000 else 400.0} for t in range(0, 6000, 500)]
    gpus = [{"t_ms": t + 10, "w": [250.0, 250.0], "j": [t / 4, t / 4]} for t in range(0, 6000, 500)]
    _stream(raw_path(tmp_path, 0), node)
    _stream(gpu_path(tmp_path, 0), gpus)
    g = gpu_telemetry(tmp_path, 0, 1000, 5000)
    assert g == {"gpus": 2, "gpu_energy_j": 1750.0, "readings": 9, "below_gpus": 5}  # 3000..5000 read 400 W
    _stream(gpu_path(tmp_path, 1), [{"t_ms": 0, "note": "no NVIDIA driver here (NVMLError_LibraryNotFound)"}])
    assert "no NVIDIA driver" in gpu_telemetry(tmp_path, 1, 0, 5000)["note"]


def test_the_sampler_says_in_one_line_when_nvml_has_no_driver():
    pytest.importorskip("pynvml")
    from harness.run.power.sampler import Gpus

    g = Gpus()
    if g.handles:
        pytest.skip("this host has an NVIDIA driver")
    assert g.note.startswith("no NVIDIA driver here (NVMLError_") and g.line() is None


def test_diagnose_gives_energy_per_sample_from_the_streams(tmp_path):
    """2 s at 500 W x 0.9 = 900 J; 100 samples in 1 s of steps = 100 samples/s; 450 W / 100 = 4.5 J."""
    from harness.core.power_stream import raw_path
    from harness.review.diagnose import energy
    from harness.review.diagnose.inputs import RunData

    _stream(raw_path(tmp_path, 0), [{"t_ms": t, "w": 500.0} for t in range(0, 4000, 100)])
    (tmp_path / "power" / "power.json").write_text(json.dumps({"conversion_eff": 0.9}))
    events = [{"key": "run_start", "time_ms": 1000}, {"key": "run_stop", "time_ms": 3000}]
    timings = [{"samples": 10, "step_time_s": 0.1}] * 10
    prof, note = energy.profile(RunData("x", tmp_path, None, events=events, timings=timings))
    assert prof["energy_j"] == pytest.approx(900) and prof["energy_per_sample_j"] == pytest.approx(4.5)
    assert "4.5 J per sample at 100 samples/s" in note
    assert energy.profile(RunData("x", tmp_path / "none", None, events=events)) is None
