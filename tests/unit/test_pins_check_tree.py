"""`mlperf check` on a submission tree (harness/review/check/tree.py) where bench/mutation.py found
nothing pinned: what each tool reports, what is kept from the package checker and why, a result
folder's odd entries, the RCP step's scaling.json, power logs, and a package checker crash.
Trees are tests/data/tiny_tree (our own tiny gpt3 runs, open) or the fixture logs in a closed one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from fixtures import fixture_path

from harness.review.check import check_path

TINY_TREE = Path(__file__).resolve().parents[1] / "data" / "tiny_tree" / "MyOrg"
LOGS = fixture_path("logs")
GPT3 = Path("results/cpu-local/gpt3")


def _tiny(tmp_path: Path) -> Path:
    org = tmp_path / "MyOrg"
    shutil.copytree(TINY_TREE, org)
    return org


def _closed(tmp_path: Path, logs: list[str], bench: str = "gnn") -> Path:
    """A closed tree: Org/systems/sysA.json (tiny_tree's, closed) and results/sysA/<bench>/."""
    org = tmp_path / "Org"
    folder = org / "results" / "sysA" / bench
    folder.mkdir(parents=True)
    for i, text in enumerate(logs):
        (folder / f"result_{i}.txt").write_text(text)
    desc = json.loads((TINY_TREE / "systems" / "cpu-local.json").read_text())
    desc.update(submitter="Org", division="closed", status="Available on-premise", system_name="sysA")
    (org / "systems").mkdir()
    (org / "systems" / "sysA.json").write_text(json.dumps(desc))
    return org


def _tools(rep) -> dict[str, dict]:
    return {t["tool"]: t for t in rep.tools}


def _errors(rep) -> list[str]:
    return [f.one_line() for f in rep.all_findings() if f.severity == "error"]


def test_a_passing_tree_lists_each_tool_and_its_counts(tmp_path):
    rep = check_path(_tiny(tmp_path))
    assert rep.passed and len(rep.logs) == 3 and 0 <= rep.seconds < 600
    tools = _tools(rep)
    assert tools["system-desc checker"] == {
        "tool": "system-desc checker",
        "target": "systems/cpu-local.json",
        "passed": True,
        "errors": 0,
        "warnings": 0,
        "ruleset": "4.1.0",  # guessed for the whole tree: the newest listing gpt3 (its logs name none)
    }
    pkg = tools["package checker"]
    assert (pkg["target"], pkg["passed"], pkg["errors"], pkg["warnings"]) == (str(GPT3), True, 0, 0)
    assert "Running compliance checks in dir results/cpu-local/gpt3" in pkg["output"]  # not the mirror's path


def _copy_tiny(tmp_path, monkeypatch) -> Path:
    org = _tiny(tmp_path)
    monkeypatch.chdir(org)
    return org


def test_without_a_system_description_the_package_checker_is_not_run(tmp_path, monkeypatch):
    org = _copy_tiny(tmp_path, monkeypatch)
    (org / "systems" / "cpu-local.json").unlink()
    rep = check_path(org)
    (missing,) = [f for f in rep.all_findings() if f.tool == "package"]
    assert missing.message.startswith("missing systems/cpu-local.json")
    assert "the package checker would crash on this folder, so it was not run" in missing.message
    assert "system-desc checker" not in _tools(rep)  # nothing to check, and no crash reported
    assert _tools(rep)["package checker"]["passed"] is False
    assert len(rep.logs) == 3 and all(r.passed for r in rep.logs)  # each log still checked


def test_a_system_description_without_a_division(tmp_path, monkeypatch):
    org = _copy_tiny(tmp_path, monkeypatch)
    sj = org / "systems" / "cpu-local.json"
    sj.write_text(json.dumps({k: v for k, v in json.loads(sj.read_text()).items() if k != "division"}))
    rep = check_path(org)
    assert any(
        "systems/cpu-local.json has no 'division' field: the package checker would crash" in x
        for x in _errors(rep)
    )


def test_a_log_with_an_over_long_line_is_kept_from_the_package_checker(tmp_path, monkeypatch):
    org = _copy_tiny(tmp_path, monkeypatch)
    first = (org / GPT3 / "result_0.txt").read_text().splitlines()
    long_mllog = first[0][:-1] + ', "x": "' + "y" * 40_000 + '"}'
    lines = (org / GPT3 / "result_1.txt").read_text().splitlines()
    (org / GPT3 / "result_1.txt").write_text("\n".join(lines[:4] + [long_mllog] + lines[4:]) + "\n")
    # result_2: a long line of job output (no token) and an MLLOG line of exactly 32 KiB (newline
    # included): the parser takes both
    edge = first[0][:-1] + ', "x": "' + "y" * (32 * 1024 - len(first[0]) - 10) + '"}'
    assert len(edge) + 1 == 32 * 1024
    lines = (org / GPT3 / "result_2.txt").read_text().splitlines()
    (org / GPT3 / "result_2.txt").write_text("\n".join(["z" * 40_000, edge] + lines) + "\n")
    rep = check_path(org)
    kept = [f for f in rep.findings if "not given to the package checker" in f.message]
    assert [(f.file, f.line) for f in kept] == [(str(GPT3 / "result_1.txt"), 5)]
    assert any("found 2, expected 3" in x for x in _errors(rep))  # the package checker saw 2 logs


def test_odd_entries_of_a_result_folder(tmp_path, monkeypatch):
    org = _copy_tiny(tmp_path, monkeypatch)
    os.mkfifo(org / GPT3 / "job.log")  # (named result_3.txt it hangs core/tree.py header_groups)
    (org / GPT3 / "scaling.json").mkdir()
    rep = check_path(org)
    fifo = [f for f in rep.findings if f.file == str(GPT3 / "job.log")]
    assert [f.message for f in fifo] == [
        "not a regular file (a FIFO, socket or device): not given to the package checker"
    ]
    scaling = [f for f in rep.findings if f.file == str(GPT3 / "scaling.json")]
    assert len(scaling) == 1 and scaling[0].severity == "warning"
    assert scaling[0].message.startswith("scaling.json is a link or not a file")
    pkg = _tools(rep)["package checker"]
    assert pkg["passed"] is False and pkg["errors"] == 1 and pkg["warnings"] >= 1  # the FIFO fails it


def test_a_result_folder_that_is_no_benchmark(tmp_path, monkeypatch):
    org = _copy_tiny(tmp_path, monkeypatch)
    (org / GPT3).rename(org / "results" / "cpu-local" / "mybench")
    rep = check_path(org)
    (note,) = [f for f in rep.findings if f.tool == "harness" and f.severity == "warning"]
    assert note.message == "'mybench' is not a benchmark of any training ruleset of mlperf-logging"
    assert note.fix == "pass --ruleset to choose"


def test_power_logs_that_fail_the_lint_fail_the_folder(tmp_path, monkeypatch):
    org = _copy_tiny(tmp_path, monkeypatch)
    for k in range(3):
        recs = [json.loads(x.split(":::MLLOG ", 1)[1]) for x in (org / GPT3 / f"result_{k}.txt").open()]
        start = next(r["time_ms"] for r in recs if r["key"] == "run_start")
        stop = next(r["time_ms"] for r in recs if r["key"] == "run_stop")
        events = [(start - 10, "conversion_eff", 0.9, {"measurement_type": "AC"})]
        events += [(start - 5, "power_measurement_start", None, {})]
        events += [(start + i * 500, "power_reading", 100.0, {"host": "h"}) for i in range(3)]
        events += [(stop + 5, "power_measurement_stop", None, {})]
        node = org / GPT3 / "power" / f"result_{k}" / "node_0.txt"
        node.parent.mkdir(parents=True)
        node.write_text(
            "".join(
                ":::MLLOG " + json.dumps({"time_ms": t, "key": key, "value": v, "metadata": md}) + "\n"
                for t, key, v, md in events
            )
        )
    rep = check_path(org)
    lint = [f for f in rep.findings if f.tool == "power lint"]
    assert len(lint) == 3 and all("3 readings" in f.message for f in lint)
    assert not any(
        f.tool == "package" and f.severity == "error" for f in rep.findings
    )  # the package checker passes
    pkg = _tools(rep)["package checker"]
    assert pkg["passed"] is False and pkg["errors"] == 3  # ... but the folder answers for its power logs


# ---- closed trees: seeds, RCPs, scaling.json ---------------------------------------------------------
def _gnn(n_aborted: int = 0) -> list[str]:
    ok, aborted = (LOGS / "closed_gnn.txt").read_text(), (LOGS / "warn_gnn_status_aborted.txt").read_text()
    return [ok] * (10 - n_aborted) + [aborted] * n_aborted


def test_a_committed_scaling_json_the_rcp_checker_disagrees_with(tmp_path):
    org = _closed(tmp_path, _gnn())
    (org / "results" / "sysA" / "gnn" / "scaling.json").write_text('{"scaling_factor": 2.0}')
    rep = check_path(org)
    (w,) = [f for f in rep.findings if f.tool == "rcp"]
    computed = _tools(rep)["package checker"]["scaling_factor"]
    assert w.severity == "warning" and w.file.endswith("gnn/scaling.json")
    assert (
        w.message
        == f"the RCP checker computes scaling factor {computed!r}, the committed scaling.json says 2.0"
    )


def test_a_scaling_json_the_rcp_checker_stops_before_is_left_as_committed(tmp_path):
    """Two runs that did not converge: the RCP checker stops before comparing, and the folder's
    scaling.json stands (no warning)."""
    org = _closed(tmp_path, _gnn(n_aborted=2))
    (org / "results" / "sysA" / "gnn" / "scaling.json").write_text('{"scaling_factor": 2.0}')
    rep = check_path(org)
    assert not [f for f in rep.findings if f.tool == "rcp" and "scaling factor" in f.message]
    assert _tools(rep)["package checker"]["scaling_factor"] == 2.0


def test_a_package_checker_crash_is_a_finding(tmp_path):
    broken = [
        ln.replace(', "epoch_num": 0.8}', "}") if '"eval_accuracy"' in ln else ln
        for ln in (LOGS / "closed_gnn.txt").read_text().splitlines(keepends=True)
    ]
    org = _closed(tmp_path, ["".join(broken)] * 10)
    rep = check_path(org)
    crash = [f for f in rep.findings if f.message.startswith("the package checker crashed (")]
    assert len(crash) == 1 and crash[0].tool == "package" and crash[0].severity == "error"
    assert _tools(rep)["package checker"]["passed"] is False


@pytest.mark.parametrize("bench", ["bert"])
def test_the_package_checkers_rcp_step_reads_what_the_summarizer_reads(tmp_path, bench):
    """bert's RCPs count the eval's epoch_num (samples), not `train_samples`."""

    def line(t, key, value=None, **md):
        doc = {"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": key, "value": value}
        return ":::MLLOG " + json.dumps({**doc, "metadata": {"file": "x.py", "lineno": 1, **md}})

    logs = [
        "\n".join(
            [
                line(1, "submission_benchmark", bench),
                line(2, "global_batch_size", 768),
                line(3, "seed", i),
                line(4, "run_start"),
                line(5, "train_samples", 1000),
                line(6, "eval_accuracy", 0.72, epoch_num=2_400_000 + i),
                line(7, "run_stop", status="success"),
            ]
        )
        + "\n"
        for i in range(10)
    ]
    rep = check_path(_closed(tmp_path, logs, bench))
    assert _tools(rep)["package checker"]["rcp"] == "RCP Interpolation"
    assert not [f for f in rep.findings if f.tool == "rcp" and f.severity == "error"]
