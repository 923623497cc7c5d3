"""The compliance checker's message wording -> one-line findings with a fix (no checker run)."""

from __future__ import annotations

import json

from harness.review.check.messages import _crashes_official_parser, explain, scan


def _log(tmp_path, lines):
    p = tmp_path / "log.txt"
    p.write_text("noise line\n" + "\n".join(":::MLLOG " + json.dumps(x) for x in lines) + "\n")
    return scan(str(p))


REC = {
    "namespace": "",
    "time_ms": 1,
    "event_type": "POINT_IN_TIME",
    "metadata": {"file": "a.py", "lineno": 1},
}


def test_check_failure_maps_mllog_index_to_file_line(tmp_path):
    scan = _log(tmp_path, [{**REC, "key": "a", "value": 1}, {**REC, "key": "opt_name", "value": "sgd"}])
    msg = "CHECK for 'opt_name' failed in line 1:\n:::MLLOG {...}\nfailed test:  v['value'] == 'adam'\ncurrent context[s]={}"
    f = explain(msg, "error", scan, "log.txt")
    assert f.line == 3 and '(value "sgd")' in f.message and "optimizer" in f.fix and f.detail == msg


def test_requirement_and_alternative_and_unknown_messages(tmp_path):
    scan = _log(tmp_path, [{**REC, "key": "global_batch_size", "value": 8}] * 2)
    f = explain("Required EXACTLY_ONE occurrence of 'global_batch_size' but found 2", "warning", scan, "x")
    assert f.line == 3 and f.severity == "warning" and "exactly once" in f.fix
    f = explain("Required EXACTLY_ONE occurrence of 'lora_rank' but found 0", "error", scan, "x")
    assert f.line is None and "lora_rank" in f.fix
    f = explain("Required AT_LEAST_ONE occurrence of 'epoch_start' or 'block_start'", "error", scan, "x")
    assert "at least one of" in f.message
    f = explain("failed test: s['x'] > 1\ncurrent context[s]={}", "error", scan, "x")
    assert f.message.startswith("end-of-log check")
    f = explain("Something new\nsecond line", "error", scan, "x")
    assert f.message == "Something new" and f.fix and "second line" in f.detail


def test_which_lines_crash_the_official_parser():
    assert _crashes_official_parser('{"time_ms": 1, "key": "k", "value": 1}')  # no metadata: KeyError
    assert _crashes_official_parser("[1, 2]")  # not an object: TypeError
    assert _crashes_official_parser('{"time_ms": null, "key": "k", "value": 1, "metadata": {}}')  # TypeError
    assert not _crashes_official_parser(
        '{"time_ms": "1.2.3", "key": "k", "value": 1, "metadata": {}}'
    )  # ValueError
    assert not _crashes_official_parser('{"truncated": ')  # JSON error: a parsing error, not a crash
