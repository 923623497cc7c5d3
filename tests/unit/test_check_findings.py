"""`mlperf check` findings a reviewer can act on (issue 46), on copies of published folders damaged
the way real trees are: a log cut mid-record is reported as truncated first, before what the cut
makes missing, and the seed checker's fragments of it are one finding; a missing or extra run is
named, with a fix that fits (`mlperf run` only for a benchmark the harness runs, never "run more"
for too many); the committed scaling.json the rules allow raises no "unknown files" warning."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fixtures import fixture_path

from harness.review.check import check_path

AMD = "rounds/v5.1/AMD"
AMD_8B = Path("results/MI355X_EPYC_9575F_pytorch/llama31_8b")
LENOVO = "rounds/v5.0/Lenovo"
LENOVO_BERT = Path("results/SR780aV3-8xB200_SXM_180GB/bert")


def _copy(tmp_path, rel: str) -> Path:
    """The published folder under a round-named path (v5.1/AMD), so its ruleset comes from the path."""
    dst = tmp_path / rel.split("/", 1)[1]
    shutil.copytree(fixture_path(rel), dst)
    return dst


def _lines(rep, file_part: str = "") -> list[str]:
    return [f.one_line() for f in rep.all_findings() if file_part in f.file]


def test_a_published_folder_with_its_scaling_json_has_no_unknown_file_warning(tmp_path):
    rep = check_path(_copy(tmp_path, AMD))
    assert rep.passed
    assert not [x for x in _lines(rep) if "Unknown files" in x or "naming convention" in x]


def test_a_cut_log_is_truncated_first_and_a_missing_run_is_named(tmp_path):
    org = _copy(tmp_path, AMD)
    cut = org / AMD_8B / "result_3.txt"
    cut.write_bytes(cut.read_bytes()[:-150])
    (org / AMD_8B / "result_5.txt").unlink()
    rep = check_path(org)
    assert not rep.passed
    log = [f for f in rep.all_findings() if f.file.endswith("result_3.txt") and f.tool == "compliance"]
    assert log[0].message.startswith("the log is truncated") and len(log) >= 2  # then what it misses
    assert len([f for f in rep.all_findings() if f.tool == "seed"]) == 1  # not one per fragment
    (count,) = [f for f in rep.all_findings() if "result files" in f.message]
    assert "missing: result_5.txt" in count.message and "llama31_8b needs 10" in count.message
    assert "mlperf run llama31_8b --runs 1" in count.fix


def test_a_package_checker_crash_on_a_stray_power_folder_names_it_first(tmp_path):
    """A stray folder in power/ makes the official package checker crash (`max()` of nothing):
    the crash finding names the folder and the power lint's finding follows it; the checker's ten
    "no power result for result_<i>" warnings are one. Fails if the crash keeps the old advice
    about malformed log lines, or the lint comes after the per-run warnings."""
    org = _copy(tmp_path, AMD)
    (org / AMD_8B / "power" / "odd").mkdir(parents=True)
    rep = check_path(org)
    errors = [f for f in rep.all_findings() if f.severity == "error"]
    stray = str(AMD_8B / "power" / "odd")
    assert (
        errors[0].message.startswith(f"the package checker crashed on {stray} (")
        and "power/" in errors[0].fix
    )
    assert errors[1].file == stray and errors[1].tool == "power lint"
    (no_power,) = [f for f in rep.all_findings() if "no power logs" in f.message]
    assert "10 run(s)" in no_power.message and "result_9" in no_power.message
    assert (
        rep.failure_line()
        .split("first: ")[1]
        .startswith(str(AMD_8B) + ": [package] the package checker crashed on")
    )


@pytest.mark.parametrize("damage", ["extra", "missing-unrun"])
def test_the_fix_fits_the_count_problem(tmp_path, damage):
    if damage == "extra":  # too many: never "run more"
        org = _copy(tmp_path, AMD)
        shutil.copyfile(org / AMD_8B / "result_0.txt", org / AMD_8B / "result_10.txt")
        want, fix = "beyond the count: result_10.txt", "remove or renumber"
    else:  # a benchmark the harness does not run: no `mlperf run` advice
        org = _copy(tmp_path, LENOVO)
        (org / LENOVO_BERT / "result_9.txt").unlink()
        shutil.rmtree(org / LENOVO_BERT / "power" / "result_9")
        want, fix = "missing: result_9.txt", "add the 1 missing run(s)"
    (count,) = [f for f in check_path(org).all_findings() if "result files" in f.message]
    assert want in count.message and fix in count.fix and "mlperf run" not in count.fix


def test_a_tree_outside_a_round_folder_is_checked_under_one_guessed_ruleset(tmp_path):
    """The Lenovo v5.0 folder (bert, llama2_70b_lora) copied to a path naming no round: each folder
    used to pick its own ruleset (llama2 4.0.0, the 'default'); now the newest ruleset listing both,
    5.0.0, for the whole tree, said once as a warning. --round pins it without the warning; our own
    runs' trees keep the rulesets their logs name (harness_ruleset)."""
    org = tmp_path / "copy" / "Lenovo"
    shutil.copytree(fixture_path(LENOVO), org)
    rep = check_path(org)
    assert {log.ruleset for log in rep.logs} == {"5.0.0"} and len(rep.logs) == 20
    (said,) = [f for f in rep.all_findings() if f.tool == "harness" and "guessed" in f.message]
    assert "bert, llama2_70b_lora" in said.message and "--round v5.0" in said.message
    pinned = check_path(org, round_name="v5.0")
    assert not [f for f in pinned.all_findings() if "guessed" in f.message]
    assert {log.ruleset for log in pinned.logs} == {"5.0.0"}


def _set_header(log: Path, key: str, value: str) -> None:
    import re

    text = log.read_text()
    text, n = re.subn(rf'("key": "{key}", "value": )"[^"]*"', rf'\1"{value}"', text, count=1)
    assert n == 1, key
    log.write_text(text)


def test_a_foreign_log_and_an_inconsistent_system_json_each_fail_naming_both(tmp_path):
    """Both passed before: nothing compared a log's submission_* keys with the other runs of its
    folder, or the division with the system JSON."""
    import json

    org = _copy(tmp_path, AMD)
    _set_header(org / AMD_8B / "result_7.txt", "submission_org", "Dell")  # a foreign run dropped in
    (sys_json,) = (org / "systems").glob("*.json")
    desc = json.loads(sys_json.read_text())
    sys_json.write_text(json.dumps({**desc, "division": "open"}))
    errors = [
        f.message for f in check_path(org).all_findings() if f.tool == "harness" and f.severity == "error"
    ]
    assert any(
        m.startswith(
            'result_7.txt differs from the other runs of this folder: submission_org "Dell" (the others "AMD")'
        )
        for m in errors
    ), errors
    assert any("submission_division 'closed' vs division 'open'" in m for m in errors), errors


def test_runs_that_agree_on_another_org_than_the_folder_are_a_warning(tmp_path):
    """As published (v5.1 University-of-Florida's runs log NVIDIA): said, not failed."""
    org = _copy(tmp_path, AMD)
    for log in (org / AMD_8B).glob("result_*.txt"):
        _set_header(log, "submission_org", "Someone Else")
    rep = check_path(org)
    assert rep.passed
    (said,) = [f for f in rep.all_findings() if "submission_org" in f.message]
    assert said.severity == "warning" and "'Someone Else'" in said.message and "'AMD'" in said.message


def test_a_published_foreign_log_and_a_system_json_of_another_size_fail_naming_both(tmp_path):
    """The reviewer's walk with real logs: NVIDIA's v4.0 8-node llama2 run dropped into Lenovo's
    v5.0 one-node llama2 folder as result_7.txt, and a system JSON saying 2 nodes x 4. Each is an
    error naming both sides: the run's org and platform against the folder's other runs, its
    configuration keys (batch size, learning rate, ...) against theirs, the node count of the
    logs' platform ('1x...') against the JSON's number_of_nodes. Published folders raise none of
    these (test_results_rounds checks the eleven)."""
    import json

    org = _copy(tmp_path, LENOVO)
    llama = org / "results" / "SR780aV3-8xB200_SXM_180GB" / "llama2_70b_lora"
    nvidia = fixture_path("mlperf_v4.0/NVIDIA/results/eos_n8_ngc24.04_nemo/llama2_70b_lora/result_0.txt")
    shutil.copyfile(nvidia, llama / "result_7.txt")
    (sys_json,) = (org / "systems").glob("*.json")
    desc = json.loads(sys_json.read_text())
    sys_json.write_text(json.dumps({**desc, "number_of_nodes": "2", "accelerators_per_node": "4"}))
    rep = check_path(org)
    errors = [f.message for f in rep.all_findings() if f.tool == "harness" and f.severity == "error"]
    # one finding for the foreign run, naming both sides of each key, who it is first
    (run,) = [m for m in errors if m.startswith("result_7.txt differs from the other runs")]
    assert run.split(": ", 1)[1].startswith(
        'submission_org "NVIDIA" (the others "Lenovo"); submission_platform'
    )
    assert "opt_base_learning_rate 0.00036 (the others 0.00055)" in run  # its configuration, too
    system = [m for m in errors if m.startswith("the logs and the system JSON disagree")]
    assert len(system) == 2 and all("(1 nodes) vs number_of_nodes 2" in m for m in system)  # bert, llama2


def test_logs_of_another_benchmark_than_their_folder_are_an_error(tmp_path):
    """llama31_8b runs filed as flux1: each log passes under its own benchmark's rules and the
    package checker counts ten, so only the folder-against-logs check says it."""
    org = _copy(tmp_path, AMD)
    (org / AMD_8B).rename(org / AMD_8B.parent / "flux1")
    errors = [f.message for f in check_path(org).all_findings() if f.severity == "error"]
    assert "the logs say submission_benchmark 'llama31_8b'; the folder is 'flux1'" in errors, errors
