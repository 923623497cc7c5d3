"""What `results score` says about the runs of a result folder (harness/review/results/olympic.py
score_runs, exported by score.py): which runs count, and the problems each row lists. Found by
bench/mutation.py: each of these could be dropped or changed without any other test noticing."""

from __future__ import annotations

import json
import re

import pytest

from harness.review.results.parse import read_run
from harness.review.results.score import score_result_dir, score_runs, score_tree


def _line(t: int, key: str, value=None, **md) -> str:
    doc = {"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": key, "value": value}
    return ":::MLLOG " + json.dumps({**doc, "metadata": {"file": "x.py", "lineno": 1, **md}})


def _log(minutes: float, status: str = "success", junk: int = 0) -> str:
    start, stop = 1_000_000, 1_000_000 + int(minutes * 60_000)
    lines = [
        _line(start - 5000, "submission_benchmark", "gpt3"),
        _line(start, "run_start"),
        *[":::MLLOG {not json" for _ in range(junk)],
        _line(stop - 10, "eval_accuracy", 2.6, epoch_num=1),
        _line(stop, "run_stop", status=status),
    ]
    return "\n".join(lines) + "\n"


def _runs(tmp_path, *logs: str) -> list:
    paths = []
    for i, text in enumerate(logs):
        p = tmp_path / f"result_{i}.txt"
        p.write_text(text)
        paths.append(p)
    return [read_run(str(p)) for p in paths]


def test_a_checked_run_counts_whatever_its_run_stop_status_and_the_row_says_so(tmp_path):
    """The official summarizer counts every log that passes the compliance check, aborted or not;
    score_runs takes its runs as checked unless told otherwise."""
    runs = _runs(tmp_path, _log(10), _log(20, status="aborted"), _log(30))
    row = score_runs(runs, "gpt3")
    assert row["run_minutes"] == [10.0, 20.0, 30.0]
    assert row["olympic_mean_min"] == 20.0  # the aborted run is the middle one: it counts
    assert any("result_1.txt: run_stop status is 'aborted'" in p and "counted" in p for p in row["problems"])
    unchecked = score_runs(runs, "gpt3", checked=False)
    assert unchecked["run_minutes"] == [10.0, None, 30.0]  # unchecked, the status stands in for the target
    assert unchecked["olympic_mean_min"] == 30.0  # the aborted run is now the dropped slowest


def test_an_unreadable_run_quotes_its_first_three_bad_lines(tmp_path):
    runs = _runs(tmp_path, _log(10, junk=5), _log(11), _log(12))
    row = score_runs(runs, "gpt3", checked=False)
    assert row["run_minutes"] == [None, 11.0, 12.0]
    (problem,) = [p for p in row["problems"] if p.startswith("result_0.txt")]
    assert "not counted" in problem
    assert len(re.findall(r"line \d+: ", problem)) == 3  # a few of the five: the row stays one line
    assert row["olympic_mean_min"] == 12.0  # the unreadable run is the dropped slowest


@pytest.mark.parametrize("n", [3, 11])
def test_a_folder_with_the_wrong_number_of_result_files_is_flagged(tmp_path, n):
    """gpt3 needs exactly 3 result files (the package checker's count): the row says so when there
    are more, and still scores them as the summarizer does."""
    folder = tmp_path / "Org" / "results" / "sys" / "gpt3"
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"result_{i}.txt").write_text(_log(10 + i))
    row = score_result_dir(folder, check=False)
    flagged = [p for p in row["problems"] if "needs exactly 3" in p]
    assert flagged == ([] if n == 3 else [flagged[0]])
    assert row["score_min"] == pytest.approx(sum(range(11, 10 + n - 1)) / (n - 2))


@pytest.mark.parametrize("api", ["score_tree", "score_result_dir"])
def test_by_default_scoring_checks_compliance_lists_the_runs_and_skips_the_rcp_check(tmp_path, api):
    """The official semantics unless told otherwise: a log counts only when it passes the
    compliance check (these minimal logs do not), each run is listed, RCPs only with --rcp."""
    folder = tmp_path / "Org" / "results" / "sys" / "gpt3"
    folder.mkdir(parents=True)
    for i in range(3):
        (folder / f"result_{i}.txt").write_text(_log(10 + i))
    row = score_tree(tmp_path)[0] if api == "score_tree" else score_result_dir(folder)
    assert row["checked"] is True and row["score_min"] is None
    assert sum("compliance check" in p for p in row["problems"]) == 3
    assert [r["path"] for r in row["run_details"]] == [str(folder / f"result_{i}.txt") for i in range(3)]
    assert "rcp" not in row


# ---- `results score --rcp` (harness/review/results/rcp.py) --------------------------------------
def _bert_folder(tmp_path, **kw):
    """Ten closed bert runs at GBS 768 (an RCP batch of 5.0.0) converging at `epoch` samples."""
    folder = tmp_path / "bert"
    folder.mkdir()
    for i in range(10):
        lines = [_line(1, "submission_benchmark", kw.get("bench", "bert"))]
        if kw.get("bs", 768):
            lines.append(_line(2, "global_batch_size", kw.get("bs", 768)))
        lines += [
            _line(3, "run_start"),
            _line(4, "train_samples", 1000),  # logged, but bert's RCPs count the eval's epoch_num
            _line(5, "eval_accuracy", 0.72, epoch_num=kw.get("epoch", 2_400_000) + i),
            _line(6, "run_stop", status="success"),
        ]
        (folder / f"result_{i}.txt").write_text("\n".join(lines) + "\n")
    return str(folder)


def test_the_rcp_verdict_reads_what_the_summarizer_reads_and_prints_nothing(tmp_path, capsys):
    from harness.review.results.rcp import rcp_check

    got = rcp_check(_bert_folder(tmp_path), "5.0.0", 1.0, "closed")
    rec = got["rcp_record"]
    assert rec["submission_epochs"] == [2_400_000.0 + i for i in range(10)]  # eval epoch_num, sorted
    # the lowest mean the RCP accepts (RCP mean / max speedup) is below the RCP mean, and the verdict
    # is the olympic mean of the runs (one dropped at each end) against it
    assert 0 < rec["lowest_accepted_mean"] < rec["rcp_mean"]
    mean = sum(rec["submission_epochs"][1:-1]) / 8
    assert got["rcp"] == ("pass" if mean >= rec["lowest_accepted_mean"] else "fail")
    # faster than the RCP mean but accepted: the score is normalized by RCP mean / mean
    assert got["rcp_factor"] == pytest.approx(rec["rcp_mean"] / mean, rel=1e-9)
    assert capsys.readouterr().out == ""  # `results score --json --rcp` prints only the JSON


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"bs": 0}, "Could not detect global_batch_size"),  # the checker stops before comparing
        ({"bench": "nosuch"}, "the RCP checker crashed (KeyError: 'nosuch')"),
    ],
)
def test_an_rcp_check_that_stops_early_keeps_the_committed_factor(tmp_path, kw, message):
    from harness.review.results.rcp import rcp_check

    got = rcp_check(_bert_folder(tmp_path, **kw), "5.0.0", 1.25, "closed")
    assert (got["rcp"], got["rcp_message"], got["rcp_factor"]) == ("fail", message, 1.25)


@pytest.mark.parametrize("division", ["open", None])
def test_the_rcp_check_is_for_closed_results_only(tmp_path, division):
    from harness.review.results.rcp import rcp_check

    got = rcp_check(_bert_folder(tmp_path), "5.0.0", 1.0, division)
    assert got["rcp"] == "n/a" and got["rcp_factor"] is None
    assert got["rcp_message"] == f"{division or 'unknown'} division: the RCP check applies to closed results"
