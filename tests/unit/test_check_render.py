"""`mlperf check`'s text on a 96-log tree of published folders (issue 46): one row per result
folder, the findings after the table under the folder that holds them, every finding visible
(alike ones as the first and a count), no line wider than the console, no number cut, and at 120
columns the whole output in 60 lines. Before: one row per log with the ruleset's reason in each,
~230 lines with the findings scrolled away above the table."""

from __future__ import annotations

import re
import shutil

import pytest
from fixtures import fixture_path

from harness.commands.check import render
from harness.review.check import check_path

NVIDIA_N8 = "mlperf_v4.0/NVIDIA/results/eos_n8_ngc24.04_nemo"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The v4.1, v5.0 and v5.1 published folders and NVIDIA's v4.0 8-node llama2: 96 logs, under
    round-named folders (each folder's ruleset from its path), with their real findings (a
    truncated Lambda log, an 'onprem' v4.0 system JSON, Lenovo's power gaps, ...)."""
    root = tmp_path_factory.mktemp("tree")
    for rnd in ("v4.1", "v5.0", "v5.1"):
        shutil.copytree(fixture_path(f"rounds/{rnd}"), root / rnd)
    nvidia = root / "v4.0" / "NVIDIA"
    shutil.copytree(fixture_path(NVIDIA_N8), nvidia / "results" / "eos_n8_ngc24.04_nemo")
    (nvidia / "systems").mkdir()
    shutil.copy(fixture_path("mlperf_v4.0/NVIDIA/systems/eos_n8_ngc24.04_nemo.json"), nvidia / "systems")
    rep = check_path(root)
    assert len(rep.logs) == 96 and not rep.passed
    return rep


def _text(report, columns: int, monkeypatch, capsys) -> list[str]:
    monkeypatch.setenv("COLUMNS", str(columns))
    render(report)
    return capsys.readouterr().out.splitlines()


def _masked(text: str) -> str:
    """Numbers masked, whitespace dropped: a path longer than the console is broken mid-word."""
    return re.sub(r"\d+(\.\d+)?", "#", "".join(text.split()))


@pytest.mark.parametrize("columns", [80, 100, 120])
def test_a_96_log_tree_reads_at_every_width(report, columns, monkeypatch, capsys):
    lines = _text(report, columns, monkeypatch, capsys)
    assert max(len(x) for x in lines) <= columns and not any("…" in x for x in lines)
    flat = _masked("\n".join(lines))
    for f in report.all_findings():  # every finding said, alike ones once (numbers aside)
        assert _masked(f.message) in flat, f.one_line()
    folders = [t["target"] for t in report.tools if t["tool"] == "package checker"]
    assert len(folders) == 12 and all(any(x.strip().startswith(d) for x in lines) for d in folders)
    if columns == 120:
        assert len(lines) <= 60, "\n".join(lines)
        # one row per folder with its counts whole: logs, failing, errors, warnings
        lambda_row = next(x for x in lines if x.startswith("v4.1/Lambda/") and not x.endswith(":"))
        assert lambda_row.split()[1:] == ["10", "1", "PASS", "FAIL", "5", "1"], lambda_row


def test_json_lists_every_finding_once_relative_to_the_checked_root(report):
    doc = report.to_json()
    everything = doc["all_findings"]
    assert len(everything) == len(report.all_findings())
    assert all(not f["file"].startswith("/") for f in everything)
    assert any(f["file"].startswith("v4.1/Lambda/results/") and f["line"] == 779 for f in everything)
