"""Adding a benchmark is its folder and one registration (NOTES.md, "Adding a benchmark"): the fake
benchmark of tests/fake_benchmark/ (a folder with benchmark.yaml and configs/, a typed config, a
cost model from the shared formulas, lazy references to its code) is registered in a scratch
registry, and `mlperf run --dry-run`, `mlperf plan`, `mlperf benchmarks show` and `mlperf prepare`
work on it through the same code as the shipped benchmarks, with no edit anywhere else.

What fails this: any place that finds a benchmark's files, rules, cost or code by its name instead
of asking its object (a configs path built from benchmarks/<name>/, a planner table keyed by name,
a manifest writer of its own), or a command that keeps its own list of benchmarks. Planted once: the
config resolver reading benchmarks/<name>/configs/ instead of `bench.configs_dir` (run --dry-run
then says the fake has no tiny size)."""

from __future__ import annotations

import json

import pytest

import benchmarks
from harness.cli import main


@pytest.fixture
def fake():
    from tests.fake_benchmark import BENCHMARK

    with benchmarks.scratch():
        benchmarks.register(BENCHMARK)
        yield BENCHMARK


def _mlperf(capsys, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    out, err = capsys.readouterr()
    return e.value.code, out, err


def test_run_dry_run_resolves_its_config_rules_and_layout(fake, capsys, tmp_path):
    code, out, err = _mlperf(
        capsys, "run", "fake-bert", "--dry-run", "--json", "--results-dir", str(tmp_path)
    )
    assert code == 0, err
    doc = json.loads(out)
    plan = doc["plans"][0] if "plans" in doc else doc["plan"]
    assert plan["benchmark"] == "bert" and plan["size"] == "tiny"
    assert plan["config"]["hidden_size"] == 64  # from tests/fake_benchmark/bert/configs/tiny.yaml
    assert plan["ruleset"] == "5.0.0"  # the newest ruleset the installed package lists it in
    assert not list(tmp_path.iterdir())  # a dry run writes nothing


def test_plan_prices_it_with_its_own_cost_model(fake, capsys):
    code, out, err = _mlperf(capsys, "plan", "bert", "--system", "dgx-h100x8", "--json", "--top", "2")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["benchmark"] == "bert" and doc["options"] and doc["predicted_min"] > 0
    # no published rows: the default priors, said so (not 0, not another benchmark's constants)
    assert any("no published bert results fitted" in n for n in doc["notes"]), doc["notes"]


def test_benchmarks_show_reads_its_rulesets_from_the_package(fake, capsys):
    code, out, err = _mlperf(capsys, "benchmarks", "show", "bert", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["benchmark"] == "bert" and doc["default_ruleset"]["ruleset"] == "5.0.0"
    assert {"4.0.0", "5.0.0"} <= {r["ruleset"] for r in doc["rulesets"]}


def test_prepare_writes_the_one_manifest_shape_in_a_child_process(fake, capsys, tmp_path):
    data = tmp_path / "data"
    code, out, err = _mlperf(capsys, "prepare", "bert", "--data-dir", str(data))
    assert code == 0, err
    assert "bert (tiny) data ready" in out
    m = json.loads((data / "PREPARED.json").read_text())
    assert (m["benchmark"], m["size"], m["fields"], m["facts"]) == (
        "bert",
        "tiny",
        {"max_sequence_length": 512, "data_seed": 1},
        {"generated": True},
    )
    assert fake.impl.data.is_prepared(type("P", (), {**m, "data_dir": str(data), "config": m["fields"]}))


def test_outside_the_scratch_registry_it_is_a_benchmark_the_harness_does_not_run(capsys):
    code, _, err = _mlperf(capsys, "run", "bert", "--dry-run")
    assert code == 2 and "does not run 'bert'" in err and len(err.strip().splitlines()) == 1


def test_tiny_rules_follow_the_registry_in_and_out_of_scratch():
    """The tiny rules name the benchmarks registered now: a path cached by ruleset alone kept
    'bert' after its scratch registry closed, so a later tiny bert log was checked as ours."""
    from pathlib import Path

    from benchmarks import tiny_rules
    from tests.fake_benchmark import BENCHMARK

    with benchmarks.scratch():
        benchmarks.register(BENCHMARK)
        assert (Path(tiny_rules.config_path("5.0.0")).parent / "bert").is_dir()
    assert not (Path(tiny_rules.config_path("5.0.0")).parent / "bert").exists()
