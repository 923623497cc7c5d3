"""Rulesets, benchmarks and renames read from the installed mlperf-logging; ruleset inference;
the fast official parse and compliance step equal to the package's own."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from fixtures import fixture_path

from harness.core import rulesets as rules
from harness.core.errors import ConfigError
from harness.review.check.official import parse, quiet_check


def test_rulesets_benchmarks_and_renames_come_from_the_package():
    rs = rules.rulesets()
    assert {"3.0.0", "4.0.0", "4.1.0", "5.0.0", "5.1.0", "6.0.0", "6.1.0"} <= set(rs)
    assert list(rs) == sorted(rs, key=lambda r: tuple(map(int, r.split("."))))
    assert "llama31_405b" in rules.benchmarks_of("5.0.0") and "gnn" not in rules.benchmarks_of("5.0.0")
    assert rules.renames() == {"gnn": "rgat", "ssd": "retinanet"}  # found by identical RCP files
    assert rules.linked("rgat") == rules.linked("gnn") == ["gnn", "rgat"]
    assert rules.linked("gpt3") == ["gpt3"]
    assert rules.runs_required("llama31_405b") == 3 and rules.runs_required("rgat") == 10


def test_olympic_drop_count_is_still_the_summarizers():
    """max_dropped() repeats an inline rule of the summarizer and the RCP checker: read their
    source (without importing them) so a change in the package fails here."""
    for mod in (
        "mlperf_logging.result_summarizer.result_summarizer",
        "mlperf_logging.rcp_checker.rcp_checker",
    ):
        src = Path(importlib.util.find_spec(mod).origin).read_text()
        rule = set(
            re.findall(r"= (\d+) if \S*(?:benchmark|Benchmark\S*) == ['\"]unet3d['\"] else (\d+)", src)
        )
        assert rule == {("4", "1")}, (mod, rule)
    assert rules.max_dropped("unet3d") == 4 and rules.max_dropped("bert") == 1


@pytest.mark.parametrize(
    "kw,want",
    [
        ({"ruleset": "5.1.0"}, ("5.1.0", "--ruleset")),
        ({"round_name": "v5.0"}, ("5.0.0", "round v5.0")),
        ({"path": "/x/training_results_v4.1/Org/results"}, ("4.1.0", "round folder 'training_results_v4.1'")),
        ({"benchmark": "gpt3"}, ("4.1.0", "default: the newest listing gpt3")),
        ({"benchmark": "llama31_8b"}, ("6.1.0", "default: the newest listing llama31_8b")),
        ({}, ("6.1.0", "default: the newest")),
    ],
)
def test_ruleset_inference(kw, want):
    assert rules.resolve(**kw) == want


def test_unknown_names_are_one_clear_line():
    with pytest.raises(ConfigError, match=r"unknown ruleset '5\.2\.0'.*known: 0\.6\.0, .*6\.1\.0"):
        rules.validate_ruleset("5.2.0")
    with pytest.raises(ConfigError, match="round 'v9.9' has no ruleset"):
        rules.resolve(round_name="v9.9")
    with pytest.raises(
        ConfigError,
        match="unknown benchmark 'rgatt' \\(did you mean 'rgat'\\?\\): mlperf-logging knows bert, ",
    ):
        rules.validate_benchmark("rgatt")
    with pytest.raises(ConfigError, match="'llama31_405b' is not in ruleset 4.0.0"):
        rules.validate_benchmark("llama31_405b", "4.0.0")
    assert rules.validate_benchmark("gnn", "5.0.0") == "gnn"  # as rgat there
    rs, how, problem = rules.for_benchmark("gnn", round_name="v5.0")
    assert rs == "4.1.0" and "not a benchmark of ruleset 5.0.0" in problem and "crashes" in problem


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    rounds = fixture_path("rounds")
    lam = next(rounds.glob("v4.1/Lambda/results/*/llama2_70b_lora"))
    good = next(rounds.glob("v5.1/University-of-Florida/results/*/dlrm_dcnv2")) / "result_0.txt"
    bad = tmp_path_factory.mktemp("bad")
    lines = good.read_text().splitlines()
    cases = {
        "no_metadata.txt": [*lines[:5], ':::MLLOG {"time_ms": 1, "key": "x", "value": 1}', *lines[5:]],
        "list.txt": [*lines[:5], ":::MLLOG [1, 2]", *lines[5:]],
        "bad_time.txt": [*lines[:5], ':::MLLOG {"time_ms": "1.2.3", "key": "x", "value": 1, "metadata": {}}'],
        "prefixed.txt": [f"0: [rank0]: junk :::MLLOG x {ln}  " for ln in lines],
    }
    for name, body in cases.items():
        (bad / name).write_text("\n".join(body) + "\n")
    return [good, lam / "result_240928173116824495865_1.txt", *sorted(bad.iterdir())]


def test_fast_parse_and_check_are_the_packages(logs):
    from mlperf_logging.compliance_checker import mlp_compliance
    from mlperf_logging.compliance_checker.mlp_parser import parse_file

    for f in logs:
        rs = "4.1.0" if "Lambda" in str(f) else "5.1.0"
        try:
            want, want_err = parse_file(str(f), rs), None
        except Exception as e:  # noqa: BLE001 - the package's own crash is part of the contract
            want, want_err = None, type(e)
        try:
            got, got_err = parse(str(f), rs), None
        except Exception as e:  # noqa: BLE001
            got, got_err = None, type(e)
        assert (got, got_err) == (want, want_err), f.name
        checker = mlp_compliance.make_checker("training", rs, True, False)
        mlp_compliance.enqueued_configs.clear()
        try:
            official = mlp_compliance.main(str(f), f"training_{rs}/common.yaml", checker)[0]
        except Exception:  # noqa: BLE001
            official = "crash"
        mlp_compliance.enqueued_configs.clear()
        v = quiet_check(str(f), rs)
        assert (v.passed, v.crashed) == (official is True, official == "crash"), (f.name, official, v)
    assert [quiet_check(str(f), "5.1.0").passed for f in logs[2:]] == [False, False, False, True]
    assert "KeyError" in quiet_check(str(logs[4]), "5.1.0").why  # bad_time, list, no_metadata, prefixed
    assert json.loads(json.dumps(quiet_check(str(logs[1]), "4.1.0").why))  # one printable line


@pytest.mark.parametrize(
    "args,msg",
    [
        (("check", "README.md", "--ruleset", "4.2.0"), "error: unknown ruleset '4.2.0'"),
        (
            ("results", "score", "tests", "--round", "v9.9"),
            "error: round 'v9.9' has no ruleset in mlperf-logging",
        ),
        (("results", "compare", "-b", "llama3"), "error: unknown benchmark 'llama3'"),
        (
            ("results", "compare", "-b", "llama31_405b", "--ruleset", "4.1.0"),
            "error: benchmark 'llama31_405b' is not in",
        ),
    ],
)
def test_cli_unknown_ruleset_round_or_benchmark_is_one_line_exit_2(mlperf, args, msg):
    p = mlperf(*args)
    assert p.returncode == 2 and p.stderr.startswith(msg) and len(p.stderr.strip().splitlines()) == 1, (
        p.stderr
    )


def test_libyaml_reads_every_rule_file_as_the_pure_python_loader():
    """check.official caches rule files read with CBaseLoader; the checker reads BaseLoader."""
    import yaml

    from harness.review.check.log import tiny_rules_path

    here = Path(importlib.util.find_spec("mlperf_logging.compliance_checker").origin).parent
    files = [f for f in sorted(here.glob("training_*/*.yaml")) if f.parent.name >= "training_3.0.0"]
    for rs in ("4.0.0", "6.1.0"):
        files += [
            Path(tiny_rules_path(rs)),
            *sorted(Path(tiny_rules_path(rs)).parent.glob("*/tiny_rules.yaml")),
        ]
    assert len(files) > 100
    for f in files:
        with open(f) as a, open(f) as b:
            assert yaml.load(a, Loader=yaml.CBaseLoader) == yaml.load(b, Loader=yaml.BaseLoader), f
