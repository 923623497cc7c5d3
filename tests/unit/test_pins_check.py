"""What `mlperf check` says about a log and a folder of logs (harness/review/check/log.py and
path.py) where bench/mutation.py found nothing pinned: which ruleset a log is checked under and
why, the one-finding answers for files the official checker cannot take (a FIFO, an unreadable
file, megabyte lines, an empty file, a tiny log without tiny rules, a broken JSON line), which
files of a folder are logs, and the report's counts and last line."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from fixtures import fixture_path

from harness.core import rulesets as rules
from harness.review.check import check_log, check_path

LOGS = fixture_path("logs")


def _log(tmp_path: Path, name: str, src: str = "closed_gnn.txt", edit=None, folder: str = "") -> Path:
    """A copy of a fixture log, its MLLOG records passed through `edit` (record -> record or a list)."""
    lines = (LOGS / src).read_text().splitlines()
    if edit:
        out = []
        for ln in lines:
            rec = json.loads(ln.split(":::MLLOG ", 1)[1])
            new = edit(rec)
            out += [":::MLLOG " + json.dumps(r) for r in (new if isinstance(new, list) else [new])]
        lines = out
    path = tmp_path / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _with(key: str, value):
    """An edit adding `key: value` after submission_benchmark."""

    def edit(rec):
        if rec["key"] != "submission_benchmark":
            return rec
        return [rec, {**rec, "key": key, "value": value}]

    return edit


# ---- which ruleset ----------------------------------------------------------------------------------
def test_a_log_that_names_its_ruleset_is_checked_under_it_unless_told_otherwise(tmp_path):
    p = _log(tmp_path, "ours.txt", edit=_with("harness_ruleset", "4.1.0"))
    res = check_log(p)
    assert (res.ruleset, res.ruleset_source) == ("4.1.0", "the log's harness_ruleset") and res.passed
    assert (check_log(p, "4.0.0").ruleset, check_log(p, "4.0.0").ruleset_source) == ("4.0.0", "--ruleset")
    assert check_log(p, round_name="v4.0").ruleset_source == "round v4.0"
    unknown = check_log(_log(tmp_path, "odd.txt", edit=_with("harness_ruleset", "9.9.9")))
    # a ruleset the package lacks is ignored: the default, as `mlperf run` takes it (the newest with gnn)
    assert (unknown.ruleset, unknown.ruleset_source) == ("4.1.0", "default: the newest listing gnn")


def test_a_round_without_the_benchmark_is_checked_under_the_nearest_ruleset_and_says_so():
    res = check_log(LOGS / "closed_gnn.txt", round_name="v5.0")  # gnn is rgat from 5.0.0 on
    assert res.ruleset == "4.1.0"
    (note,) = [f for f in res.findings if f.tool == "harness"]
    assert note.severity == "warning" and note.fix == "pass --ruleset to choose"
    assert (
        note.message.startswith("gnn is not a benchmark of ruleset 5.0.0")
        and "checked under 4.1.0" in note.message
    )


def test_a_log_of_an_unknown_benchmark_takes_the_round_of_its_folder_or_the_default(tmp_path):
    rename = lambda r: {**r, "value": "nosuch"} if r["key"] == "submission_benchmark" else r  # noqa: E731
    plain = check_log(_log(tmp_path, "a.txt", edit=rename))
    newest = rules.rulesets()[-1]
    assert (plain.ruleset, plain.ruleset_source) == (newest, "default: the newest") and not plain.passed
    in_round = check_log(_log(tmp_path, "a.txt", edit=rename, folder="training_results_v5.0"))
    assert (in_round.ruleset, in_round.ruleset_source) == ("5.0.0", "round folder 'training_results_v5.0'")


# ---- files the official checker cannot take: one finding each ---------------------------------------------
def _only(res) -> str:
    assert not res.passed and len(res.findings) == 1, [f.one_line() for f in res.findings]
    return res.findings[0].message


def test_a_fifo_is_one_error(tmp_path):
    os.mkfifo(tmp_path / "result_0.txt")
    res = check_log(tmp_path / "result_0.txt")
    assert _only(res) == "not a regular file (a FIFO, socket or device)"
    assert not res.tiny and not res.crashed


def test_an_unreadable_log_is_one_error(tmp_path):
    os.symlink("nowhere.txt", tmp_path / "result_0.txt")
    res = check_log(tmp_path / "result_0.txt")
    assert _only(res).startswith("cannot read the file: ") and not res.crashed


def test_megabyte_lines_are_not_handed_to_the_checker(tmp_path):
    # a log the checker would fail (wrong learning rate): with its long lines it is not run at all
    good = (LOGS / "broken_gpt3_wrong_lr.txt").read_text().splitlines()
    junk = [good[0][:-1] + ', "x": "' + "y" * 40_000 + '"}' for _ in range(5)]
    p = tmp_path / "result_0.txt"
    p.write_text("\n".join(good[:3] + junk + good[3:]) + "\n")
    res = check_log(p)
    assert res.crashed and not res.passed
    assert [f.line for f in res.findings] == [4, 5, 6]  # the first three, at their file lines
    assert all(re.match(r"MLLOG line of 40,\d{3} characters", f.message) for f in res.findings)


def test_a_log_without_mllog_lines_is_one_finding(tmp_path):
    (tmp_path / "result_0.txt").write_text("job started\njob ended\n")
    res = check_log(tmp_path / "result_0.txt")
    assert re.fullmatch(r"No log lines detected \(\d+ required keys missing as a result\)", _only(res))


def test_a_tiny_log_of_a_benchmark_without_tiny_rules(tmp_path):
    def edit(r):
        r = {**r, "value": "bert"} if r["key"] == "submission_benchmark" else r
        return [r, {**r, "key": "harness_size", "value": "tiny"}] if r["key"] == "submission_benchmark" else r

    res = check_log(_log(tmp_path, "result_0.txt", "open_gnn_tiny.txt", edit))
    assert res.tiny
    assert _only(res).startswith("tiny log of 'bert', which is not one of our benchmarks in ruleset 5.0.0")


def test_a_log_the_official_checker_crashes_on_is_marked_crashed():
    assert check_log(LOGS / "broken_gnn_line_without_metadata.txt").crashed
    ok = check_log(LOGS / "closed_gnn.txt")
    assert ok.passed and not ok.crashed and not ok.tiny and ok.benchmark == "gnn" and ok.division == "closed"
    assert 0 <= ok.seconds < 60


def test_a_broken_json_line_is_one_finding_at_its_file_line():
    path = LOGS / "broken_gnn_bad_json_line.txt"
    bad = [n for n, ln in enumerate(path.read_text().splitlines(), 1) if not ln.rstrip().endswith("}")]
    res = check_log(path)
    parsing = [f for f in res.findings if "parsing errors" in f.message]
    assert [f.line for f in parsing] == bad == [26]
    assert parsing[0].message.startswith("Log lines had parsing errors: not valid JSON")


# ---- a folder of logs -------------------------------------------------------------------------------
def test_which_files_of_a_folder_are_logs(tmp_path, monkeypatch):
    run = tmp_path / "runs"
    _log(run, "result_0.txt", folder="a")
    _log(run, "copy.txt", folder=".hidden")  # a hidden folder is not looked into
    os.symlink(run / "a", run / "linked")  # nor is a symlinked folder (a loop would never end)
    (run / "README.txt").write_text("notes, no MLLOG lines\n")
    os.symlink("gone.txt", run / "notes.txt")  # unreadable: checked, so the report says why
    # ":::MLLOG " across the first 1 MiB read's end: still a log
    big = run / "big.log"
    head = ("x" * 99 + "\n") * (2**20 // 100)
    pad = "x" * (2**20 - len(head) - 4) + "\n"
    big.write_text(head + pad + (LOGS / "closed_gnn.txt").read_text().splitlines()[0] + "\n")  # one token
    assert big.read_bytes().index(b":::MLLOG ") < 2**20 < big.read_bytes().index(b":::MLLOG ") + 9
    monkeypatch.chdir(run)
    rep = check_path(run)
    assert sorted(r.path for r in rep.logs) == ["a/result_0.txt", "big.log", "notes.txt"]
    assert rep.skipped == ["README.txt"]
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    outside = check_path(run / "a")
    assert [r.path for r in outside.logs] == [str(run / "a" / "result_0.txt")]  # outside the cwd: absolute


def test_the_report_counts_and_its_last_line(tmp_path, monkeypatch):
    names = ["closed_gnn.txt", "broken_gpt3_wrong_lr.txt", "broken_gnn_wrong_optimizer.txt"]
    for name in names + ["warn_gnn_duplicate_same_batch_size.txt"]:
        (tmp_path / name).write_text((LOGS / name).read_text())
    monkeypatch.chdir(tmp_path)
    rep = check_path(tmp_path)
    doc = rep.to_json()
    assert doc["counts"] == {"logs": 4, "logs_failed": 2, "errors": 2, "warnings": 1}
    assert doc["passed"] is False and doc["exit_code"] == 4
    assert rep.failure_line().startswith(
        "check failed (2 errors, 2 of 4 logs failing); first: broken_gnn_wrong_optimizer.txt:11: "
        "[compliance] CHECK for 'opt_name' failed"
    )
    good = check_path(tmp_path / "closed_gnn.txt")
    assert good.passed and good.failure_line() is None and good.to_json()["exit_code"] == 0


@pytest.mark.parametrize("rs", ["4.1.0", None])
def test_a_single_log_report_names_the_ruleset_used(rs):
    rep = check_path(LOGS / "closed_gnn.txt", ruleset=rs)
    assert rep.ruleset == (rs or "4.1.0") and rep.kind == "log"  # default: the newest listing gnn


# ---- a system description (harness/review/check/systems.py) ------------------------------------------
def _system(tmp_path, **changes) -> tuple[Path, dict]:
    src = fixture_path("mlperf_v4.0/NVIDIA/systems/eos_n64_ngc24.04_nemo.json")
    desc = {**json.loads(src.read_text()), "status": "Available on-premise", **changes}
    desc = {k: v for k, v in desc.items() if v is not None}
    p = tmp_path / "sys.json"
    p.write_text(json.dumps(desc))
    return p, desc


def _system_check(tmp_path, text: str | None = None, **changes):
    from harness.review.check.systems import check_system_json

    p, desc = _system(tmp_path, **changes)
    if text is not None:
        p.write_text(text)
    ok, findings = check_system_json(str(p), "5.0.0", "sys.json", None if text is not None else desc)
    return ok, [(f.message, f.fix) for f in findings]


def test_a_complete_system_description_passes(tmp_path):
    assert _system_check(tmp_path) == (True, [])
    assert _system_check(tmp_path, system_name="") == (True, [])  # empty strings are allowed


def test_each_system_description_problem_comes_with_its_fix(tmp_path):
    ok, found = _system_check(tmp_path, host_memory_capacity=None)
    assert not ok and found == [("Missing field host_memory_capacity", found[0][1])]
    assert found[0][1].startswith('add "host_memory_capacity" (a string, may be empty)')
    ok, found = _system_check(tmp_path, status="onprem")  # v4.0's value, refused from ruleset 4.0.0 on
    assert not ok and found[0][0].startswith("Field status contains a non valid value: onprem")
    assert found[0][1].startswith("set \"status\" to one of 'Available on-premise'")


@pytest.mark.parametrize(
    "text,fix",
    [
        ("{not json", "the file is not valid JSON"),
        ('{"submitter": 5, "system_name": "s"}', 'every value must be a string ("8", not 8)'),
    ],
)
def test_a_system_description_the_checker_crashes_on(tmp_path, text, fix):
    ok, found = _system_check(tmp_path, text=text)
    assert not ok and len(found) == 1
    assert found[0][0].startswith("the system-description checker crashed (") and found[0][1].startswith(fix)


@pytest.mark.parametrize("value", ["0", "-4", "8.5", "eight"])
def test_a_count_that_is_not_a_whole_number_fails_what_the_official_checker_passes(tmp_path, value):
    ok, found = _system_check(tmp_path, number_of_nodes=value)
    assert not ok
    assert found == [(f'"number_of_nodes" is "{value}": a count must be a whole number >= 1', found[0][1])]
    assert _system_check(tmp_path, accelerators_per_node="8")[0]


# ---- the official checker as the result summarizer runs it (harness/review/check/official.py) -----
@pytest.mark.parametrize("ruleset", ["0.6.0", "4.0.0"])
def test_logs_are_parsed_as_the_packages_own_parser_parses_them(ruleset, tmp_path):
    """0.6.0 logs have another token (its own parser reads them), later ones are cut at the last
    ':::MLLOG ' and handed to the package's string_to_logline: the same lines, the same failures."""
    from harness.review.check import official

    v06 = tmp_path / "v06.txt"  # the 2019 format: `:::MLL <time> <key>: <json>`
    v06.write_text(
        ':::MLL 1558767599.999 run_start: {"value": null, "metadata": {"file": "t.py", "lineno": 1}}\n'
        ':::MLL 1558767600.123 eval_accuracy: {"value": 0.75, "metadata": {"epoch_num": 1, "file": "t.py", "lineno": 2}}\n'
    )
    got = official.parse(str(v06), ruleset)[0]
    assert [ll.key for ll in got] == (["run_start", "eval_accuracy"] if ruleset == "0.6.0" else [])
    for name in ("closed_gnn.txt", "broken_gnn_bad_json_line.txt"):
        path = str(LOGS / name)
        ours, theirs = official.parse(path, ruleset), official.parser_module(ruleset).parse_file(path)
        assert [(ll.key, ll.timestamp) for ll in ours[0]] == [(ll.key, ll.timestamp) for ll in theirs[0]]
        assert ours[1] == theirs[1]


def test_the_summarizers_compliance_verdicts_and_their_one_line_reasons():
    from harness.review.check.official import quiet_check

    def why(name):
        v = quiet_check(str(LOGS / name), "4.0.0")
        assert not v.crashed
        return v.passed, v.why

    assert why("warn_gnn_duplicate_same_batch_size.txt") == (True, None)  # warnings do not fail a log
    assert why("broken_gpt3_wrong_lr.txt") == (
        False,
        "CHECK for 'opt_base_learning_rate' failed in line 12 (failed test:  v['value'] == 2e-5 or v['value'] == 3e-5 )",
    )
    passed, reason = why("broken_gnn_bad_json_line.txt")
    assert not passed and reason.startswith("unparsable MLLOG line (Expecting value")
    assert why("no_such_log.txt") == (False, "cannot read the file: No such file or directory")


def test_only_our_tiny_logs_get_the_tiny_rules(tmp_path):
    from harness.review.check.log import tiny_rules_path
    from harness.review.check.official import quiet_check

    tiny = tmp_path / "tiny.txt"
    tiny.write_text(
        (Path(__file__).parents[1] / "data/tiny_tree/MyOrg/results/cpu-local/gpt3/result_0.txt").read_text()
    )
    assert quiet_check(str(tiny), "4.0.0", tiny_rules_path).passed
    plain = quiet_check(str(tiny), "4.0.0")  # no tiny rules offered: the full-size rules, which it fails
    assert not plain.passed and not plain.crashed and "max_sequence_length" in plain.why
    full = tmp_path / "full.txt"
    full.write_text(tiny.read_text().replace('"value": "tiny"', '"value": "full"'))
    v = quiet_check(str(full), "4.0.0", tiny_rules_path)  # a full-size log: full-size rules
    assert not v.passed and v.why == plain.why  # not the tiny rules' "harness_size == 'tiny'" failure
    assert (
        plain.why == "CHECK for 'max_sequence_length' failed in line 12 (failed test:  v['value'] == 2048 )"
    )


def test_a_checker_message_is_condensed_to_one_line():
    """The first line, plus the failed test where the message names one on a later line."""
    from harness.review.check.official import _condense

    assert _condense("CHECK for 'x' failed in line 3:\nfailed test: v == 1\n") == (
        "CHECK for 'x' failed in line 3 (failed test: v == 1)"
    )
    assert _condense("  Required key missing: run_stop\n  more\n") == "Required key missing: run_stop"
    assert _condense("failed test: v == 1\nfailed test: v == 2") == "failed test: v == 1"  # not repeated


# ---- check_path's arguments and a folder's power logs (path.py) --------------------------------
def test_an_unknown_ruleset_or_round_is_one_line_before_anything_runs():
    from harness.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^unknown ruleset '9.9.9'"):
        check_path(LOGS / "closed_gnn.txt", ruleset="9.9.9")
    with pytest.raises(ConfigError, match=r"^round 'v9.9' has no ruleset in mlperf-logging \(known: 0.6.0, "):
        check_path(LOGS / "closed_gnn.txt", round_name="v9.9")
    assert check_path(LOGS / "closed_gnn.txt", round_name="v4.0").logs[0].ruleset == "4.0.0"


def test_a_folder_of_logs_gets_the_power_lint(tmp_path):
    (tmp_path / "result_0.txt").write_text((LOGS / "closed_gnn.txt").read_text())
    node = tmp_path / "power" / "result_0" / "node_0.txt"
    node.parent.mkdir(parents=True)
    node.write_text(
        ":::MLLOG " + json.dumps({"time_ms": 1, "key": "power_reading", "value": 5.0, "metadata": {}}) + "\n"
    )
    rep = check_path(tmp_path)
    assert any(f.tool == "power lint" for f in rep.findings) and not rep.passed
    assert 0 <= rep.seconds < 600


def test_a_checker_message_that_cannot_be_formatted_is_kept_raw():
    """The official tools log with %-formatting; a bad argument must not lose the message."""
    import logging

    from harness.review.check.log import captured_official_output

    def record(msg, *args):
        return logging.LogRecord("mlp_compliance", logging.WARNING, "x.py", 1, msg, args, None)

    with captured_official_output() as (records, _out, _warned):
        # straight to the capture (pytest's own handler on the root logger would raise on the first)
        (capture,) = [h for h in logging.getLogger().handlers if type(h).__name__ == "_Handler"]
        capture.handle(record("found %d lines", "many"))
        capture.handle(record("checked %s", "x.txt"))
    assert records == [("WARNING", "found %d lines"), ("WARNING", "checked x.txt")]


def test_the_fast_token_cut_substitutes_exactly_as_the_regex_it_replaces():
    """Inside fast_token_regex(module), `module.re.sub` must return what `re.sub` returns for every
    call: the cut at the last token where it is the same, the real regex everywhere else (another
    pattern or replacement, a count, a line with a newline inside, which `.*` does not cross)."""
    import re
    import types

    from harness.core.mllog_reader import TOKEN
    from harness.review.check.official import fast_token_regex

    line = 'x :::MLLOG {"key": "a"} :::MLLOG {"key": "b"}\n'
    calls = [
        (".*" + TOKEN, TOKEN, line),
        (".*" + TOKEN, TOKEN, "no token here\n"),
        (".*" + TOKEN, TOKEN, TOKEN + "{}"),
        (".*" + TOKEN, TOKEN, "a :::MLLOG 1\nb :::MLLOG 2"),  # two lines: one cut per line
        (".*" + TOKEN, "", line),  # another replacement
        ("x", TOKEN, "axb"),  # another pattern
    ]
    module = types.SimpleNamespace(re=re)
    with fast_token_regex(module):
        for pattern, repl, string in calls:
            want = re.sub(pattern, repl, string)
            assert module.re.sub(pattern, repl, string) == want, (pattern, repl, string)
        assert module.re.sub(".*" + TOKEN, TOKEN, line, count=1) == re.sub(".*" + TOKEN, TOKEN, line, count=1)
        assert module.re.compile("a+").fullmatch("aa")  # everything else is the real module
    assert module.re is re


def test_the_rule_file_cache_loads_as_yaml_does(tmp_path):
    """_CachedYaml stands in for `yaml` inside mlp_compliance: a named rule file is parsed once and
    handed out as a fresh copy each time; a stream without a file name, and every other attribute,
    go to the real module."""
    import io

    import yaml

    from harness.review.check.official import _CachedYaml

    cached = _CachedYaml(yaml)
    rules = tmp_path / "rules.yaml"
    rules.write_text("- KEY:\n    NAME: run_start\n")
    with open(rules) as f:
        first = cached.load(f, Loader=yaml.BaseLoader)
    first[0]["KEY"]["NAME"] = "changed by a caller"
    with open(rules) as f:
        assert cached.load(f, Loader=yaml.BaseLoader) == [{"KEY": {"NAME": "run_start"}}]
    assert cached.load(io.StringIO("a: 1"), Loader=yaml.SafeLoader) == {"a": 1}  # no file name
    assert cached.safe_dump({"a": 1}) == "a: 1\n"


def test_a_bad_ruleset_or_round_is_refused_before_the_path_is_looked_at(tmp_path):
    from harness.core.errors import ConfigError

    missing = tmp_path / "missing.txt"
    with pytest.raises(ConfigError, match=r"^unknown ruleset '9.9.9'"):
        check_path(missing, ruleset="9.9.9")
    with pytest.raises(ConfigError, match=r"^round 'v9.9' has no ruleset"):
        check_path(missing, round_name="v9.9")


def test_the_report_names_the_ruleset_its_logs_were_checked_under(tmp_path):
    """Inferred per log when none is given: a log naming 4.0.0 is checked (and reported) under
    4.0.0, not under the default ruleset (for gnn the newest listing it, 4.1.0)."""
    rep = check_path(_log(tmp_path, "ours.txt", edit=_with("harness_ruleset", "4.0.0")))
    assert rep.ruleset == rep.logs[0].ruleset == "4.0.0" != rules.resolve(benchmark="gnn")[0]


def test_a_folder_whose_logs_name_an_unknown_ruleset_is_checked_under_the_inferred_one(tmp_path):
    """As for one log (above): a `harness_ruleset` the package does not know is not taken, the
    folder's ruleset is inferred as for anyone else's logs (not a ConfigError for the folder)."""
    from harness.core.rulesets import for_folder

    odd = _log(tmp_path, "result_0.txt", edit=_with("harness_ruleset", "9.9.9"), folder="gnn")
    assert for_folder("gnn", str(odd.parent)) == ("4.1.0", "default: the newest listing gnn", None)
    ours = _log(tmp_path, "result_0.txt", edit=_with("harness_ruleset", "4.0.0"), folder="gnn40")
    assert for_folder("gnn", str(ours.parent)) == ("4.0.0", "the logs' harness_ruleset", None)


def test_the_failure_line_counts_the_failing_logs(tmp_path):
    import shutil

    for name in ("closed_gnn.txt", "closed_gpt3.txt", "broken_gpt3_wrong_lr.txt"):
        shutil.copy(LOGS / name, tmp_path / name)
    line = check_path(tmp_path).failure_line()
    assert line is not None and "1 of 3 logs failing" in line and "broken_gpt3_wrong_lr.txt" in line, line


def test_a_reports_seconds_lie_within_the_call():
    """Report.seconds is the check's own duration: between 0 and the wall time around the call
    (an invariant, not a timing: any machine, busy or quiet)."""
    import time

    tree = Path(__file__).parents[1] / "data" / "tiny_tree"
    for path in (tree, LOGS / "closed_gnn.txt"):
        t0 = time.perf_counter()
        rep = check_path(path)
        assert 0 <= rep.seconds <= time.perf_counter() - t0, (path, rep.seconds)
