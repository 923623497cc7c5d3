"""The power lint (harness/review/check/power.py): what MLPerf Power requires that the official
package checker does not check. Each case plants one defect a sampler or a converter really makes
(2 s sampling, a repeated stamp, a window opened after run_start, a stray backup file, a missing
host, an efficiency above 1, a node missing in one run) into an otherwise clean folder, which
itself must pass; the published v5.0 Lenovo power folders give the gaps they are known to have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures import fixture_path

from harness.review.check.path import check_path
from harness.review.check.power import lint

RUN_START, RUN_STOP = 1_000_000, 1_070_000  # a 70 s run


def _line(key, value, t, kind="POINT_IN_TIME", **md) -> str:
    rec = {"namespace": "", "time_ms": t, "event_type": kind, "key": key, "value": value, "metadata": md}
    return ":::MLLOG " + json.dumps(rec) + "\n"


def _node(
    path: Path,
    step_ms=1000,
    start=RUN_START - 1000,
    stop=RUN_STOP + 1000,
    eff=0.94,
    host="node_0",
    times=None,
):
    times = times or list(range(start, stop + 1, step_ms))
    text = _line("power_measurement_start", None, times[0], "INTERVAL_START")
    text += _line("conversion_eff", eff, times[0], measurement_type="AC")
    text += "".join(_line("power_reading", 1000.0, t, **({"host": host} if host else {})) for t in times)
    text += _line("power_measurement_stop", None, times[-1], "INTERVAL_END")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _folder(root: Path, runs=2, nodes=1, run_stop=RUN_STOP, **kw) -> Path:
    d = root / "MyOrg" / "results" / "sys" / "gpt3"
    d.mkdir(parents=True)
    for k in range(runs):
        log = _line("run_start", None, RUN_START, "INTERVAL_START") + _line(
            "run_stop", None, run_stop, "INTERVAL_END"
        )
        (d / f"result_{k}.txt").write_text(log)
        for i in range(nodes):
            _node(d / "power" / f"result_{k}" / f"node_{i}.txt", **kw)
    return d


def _msgs(d, **kw):
    return [(f.severity, f.message, f.line) for f in lint(str(d), str(d), **kw)]


def test_a_clean_folder_passes(tmp_path):
    assert _msgs(_folder(tmp_path)) == []


ONE_HZ = list(range(RUN_START - 1000, RUN_STOP + 1001, 1000))
CASES = [
    (
        {"times": [t for t in ONE_HZ if t != RUN_START + 30_000]},
        ("warning", "1 gap(s) between readings over 1 s"),
    ),
    ({"start": RUN_START + 5000}, ("error", "does not bracket the run")),
    ({"eff": 1.2}, ("error", "conversion_eff 1.2 is not in (0, 1]")),
    ({"host": None}, ("error", "power_reading without metadata host")),
    (
        {"run_stop": RUN_START + 50_000, "stop": RUN_START + 51_000},
        ("error", "52 readings from run_start to the window's end, fewer than 60"),
    ),
    ({"times": [*ONE_HZ[:2], ONE_HZ[1], *ONE_HZ[2:]]}, ("error", "not increasing in time")),
]


@pytest.mark.parametrize(("kw", "expect"), CASES)
def test_each_defect_is_one_finding(tmp_path, kw, expect):
    got = _msgs(_folder(tmp_path, **kw))
    sev, text = expect
    assert got and all(s == sev and text in m for s, m, _ in got), got  # one per run, nothing else
    if "not increasing" in text:
        assert {line for _s, _m, line in got} == {5}  # start, eff, 2 readings, then the repeated stamp


def test_a_short_run_whose_window_goes_on_after_run_stop_passes(tmp_path):
    """The rules' extension: a 50 s run trains on after run_stop until 60 readings exist; the
    readings after run_stop count (those before run_start do not: 1 here)."""
    assert _msgs(_folder(tmp_path, run_stop=RUN_START + 50_000, stop=RUN_START + 59_000)) == []
    got = _msgs(_folder(tmp_path / "b", run_stop=RUN_START + 50_000, stop=RUN_START + 58_000))
    assert got and all("59 readings" in m for _s, m, _l in got), got


def test_gaps_can_be_errors(tmp_path):
    long_run = {"step_ms": 2000, "run_stop": RUN_START + 140_000, "stop": RUN_START + 141_000}
    got = _msgs(_folder(tmp_path, **long_run), gap_severity="error")
    assert got and {(s, "gap(s)" in m) for s, m, _l in got} == {("error", True)}, got


def test_stray_files_and_node_counts(tmp_path):
    d = _folder(tmp_path, runs=3)
    (d / "power" / "result_0" / "node_0.txt.bak").write_text("")
    _node(d / "power" / "result_1" / "node_1.txt")  # a second node in one run only
    got = _msgs(d)
    assert any("stray file" in m for _s, m, _l in got)
    assert any("2 node file(s) where the other runs have 1" in m for _s, m, _l in got)


def test_the_published_v5_0_power_folders(tmp_path):
    """Lenovo's v5.0 B200 power logs miss about 5 % of the seconds: gaps only, as warnings, so
    `mlperf check` passes the tree; with --power-gaps error it fails on them."""
    org = fixture_path("rounds/v5.0/Lenovo")
    rep = check_path(org)
    power = [f for f in rep.findings if f.tool == "power lint"]
    assert len(power) == 20 and all(f.severity == "warning" and "gap(s)" in f.message for f in power)
    assert rep.passed
    assert not check_path(org, power_gaps="error").passed
