"""A shipped config turns a speed switch on only where a GPU measurement shows it faster (issue 48;
the bar: "a config turns on a speed switch only where a measurement shows it faster").

Reads every shipped config as `mlperf run` resolves it (defaults, size, the system's file), the
switches that are for speed only (benchmarks/base.py SPEED_SWITCHES) and the evidence table
(docs/gpu/speed_evidence.yaml), whose rows point at GPU acceptance reports (docs/gpu/*.json):
a switch on in a config needs a row of its benchmark whose `with` check has a smaller step time
than its `without` check. Fails on: a config copied from NVIDIA's record with fp8: true (the
dgx llama2 configs did so while the only measurement had FP8 1.9x slower), an evidence row whose
checks are missing from its report or never ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import benchmarks
from benchmarks.base import SPEED_SWITCHES
from harness.resolve.config import resolve

REPO = Path(__file__).resolve().parents[2]
EVIDENCE = yaml.safe_load((REPO / "docs" / "gpu" / "speed_evidence.yaml").read_text())


def _shipped():
    for name in benchmarks.runs():
        for f in sorted((REPO / "benchmarks" / name / "configs").glob("*.yaml")):
            size = "tiny" if f.stem == "tiny" else yaml.safe_load(f.read_text()).get("size", "full")
            yield name, ("cpu-local" if f.stem == "tiny" else f.stem), size


def _step_s(report: dict, check: str) -> float:
    (row,) = [c for c in report["checks"] if c["name"] == check]
    assert row["status"] == "ok", (check, row["status"], row.get("detail"))
    return row["figures"]["step_s"]


def faster(row: dict) -> bool:
    report = json.loads((REPO / row["measurement"]).read_text())
    return _step_s(report, row["with"]) < _step_s(report, row["without"])


@pytest.mark.parametrize("row", EVIDENCE, ids=lambda r: f"{r['benchmark']}-{r['switch']}")
def test_every_evidence_row_names_checks_that_ran(row):
    assert row["switch"] in SPEED_SWITCHES and row["benchmark"] in benchmarks.runs()
    faster(row)  # both checks are in the report and ran


def test_no_shipped_config_turns_on_a_speed_switch_without_a_faster_measurement():
    shown = {(r["benchmark"], r["switch"]) for r in EVIDENCE if faster(r)}
    on = []
    for name, system, size in _shipped():
        bench = benchmarks.get(name)
        cfg, prov, _src = resolve(bench, size, system, "closed" if size == "full" else "open", {})
        switches = type(cfg).SWITCHES
        for sw in SPEED_SWITCHES & set(switches):
            if getattr(cfg, sw) != switches[sw].off and (name, sw) not in shown:
                on.append(f"{name} on {system}: {sw}={getattr(cfg, sw)} ({prov.get(sw)})")
    assert not on, "speed switches on without a GPU measurement showing them faster:\n" + "\n".join(on)
