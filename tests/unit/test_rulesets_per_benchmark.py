"""Runs under every ruleset the installed mlperf-logging has for each benchmark (issue 23).

What would make these fail: a ruleset default that is not the newest listing the benchmark; a
benchmark logged under its old name (gnn in a 5.x ruleset); a shipped config that a ruleset's
closed rules refuse; a `full:` target that drifted from the package's quality window; tiny rules
that drop the ruleset's own key requirements (6.1.0's disclosure keys); a header that misses a
key the closed 6.1.0 rules require.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import benchmarks
from benchmarks import tiny_rules
from harness.core import rule_files, rulesets
from harness.core.errors import ConfigError
from harness.resolve.runplans import resolve_runs

# the keys ruleset 6.1.0 made mandatory (its common.yaml, "run-config disclosure")
DISCLOSED = {
    "lowest_numerical_precision_in_linear",
    "lowest_numerical_precision_in_attn",
    "lowest_numerical_precision_in_comm",
    "tensor_parallelism",
    "pipeline_parallelism",
    "context_parallelism",
    "expert_parallelism",
    "micro_batch_size",
    "config_filename",
}
PAIRS = [(b, rs) for b in benchmarks.available() for rs in rulesets.names_by_ruleset(b)]


def _configs(bench: str) -> list[tuple[str, str, str]]:
    """(system, size, file name) of every shipped config of the benchmark."""
    import yaml

    out = []
    for p in sorted(benchmarks.get(bench).configs_dir.glob("*.yaml")):
        size = yaml.safe_load(p.read_text()).get("size", "full")
        out.append(("cpu-local" if p.stem == "tiny" else p.stem, size, p.name))
    return out


def test_every_benchmark_has_the_rulesets_the_package_lists_it_in():
    assert {b: list(rulesets.names_by_ruleset(b)) for b in benchmarks.available()} == {
        b: [
            r
            for r in rulesets.rulesets()
            if any(b2 in rulesets.benchmarks_of(r) for b2 in rulesets.linked(b))
        ]
        for b in benchmarks.available()
    }
    assert len(PAIRS) >= 12  # 4.1.68: gpt3 4, llama2 6, gnn/rgat 4, SD 4


def test_the_default_is_the_newest_ruleset_and_its_name():
    got = {b: rulesets.for_run(b)[:2] for b in benchmarks.available()}
    for b, (rs, name) in got.items():
        has = rulesets.names_by_ruleset(b)
        assert rs == list(has)[-1] and name == has[rs]
    # mlperf-logging 4.1.68, as the issue states them
    assert got["llama2_70b_lora"] == ("6.1.0", "llama2_70b_lora")
    assert got["gnn"] == ("5.1.0", "rgat")
    assert got["stable_diffusion"][0] == "5.0.0" and got["gpt3"][0] == "4.1.0"


@pytest.mark.parametrize(("bench", "ruleset"), PAIRS)
def test_every_shipped_config_resolves_under_every_ruleset(bench, ruleset):
    name = rulesets.names_by_ruleset(bench)[ruleset]
    for system, size, filename in _configs(bench):
        r = resolve_runs(
            benchmarks.get(bench),
            system,
            size=size,
            runs=1,
            seed=0,
            ruleset=ruleset,
            results_dir="/nonexistent",
            implemented=False,  # a benchmark not run yet still has configs the rules judge
        )
        p = r.plans[0]
        assert (p.ruleset, p.submission_benchmark) == (ruleset, name)
        # what the config sets under a closed key is a value the ruleset allows at this size
        for key, (allowed, _rule, where) in r.closed.items():
            if key in p.config and allowed is not None:
                assert p.config[key] in allowed, (system, key, p.config[key], allowed, where)
        assert set(p.disclosure) == DISCLOSED
        assert p.disclosure["config_filename"] == filename


def _bound(expr: str, direction: str, metric: str) -> float:
    """The target in a quality window: the upper bound for `lower`, the lower bound for `higher`
    (of v['value'], or of v['value'][metric] for Stable Diffusion's aggregated key)."""
    tree = ast.parse(expr, mode="eval")
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        terms = [node.left, *node.comparators]
        for left, op, right in zip(terms, node.ops, terms[1:]):
            for subj, other, flip in ((left, right, False), (right, left, True)):
                text = ast.unparse(subj)
                if text not in ("v['value']", f"v['value']['{metric}']") or not isinstance(
                    other, ast.Constant
                ):
                    continue
                upper = isinstance(op, (ast.Lt, ast.LtE)) != flip
                if upper == (direction == "lower"):
                    found.append(other.value)
    assert len(found) == 1, (expr, metric, found)
    return found[0]


@pytest.mark.parametrize(("bench", "ruleset"), PAIRS)
def test_targets_equal_the_package_window_and_the_tiny_window(bench, ruleset):
    name = rulesets.names_by_ruleset(bench)[ruleset]
    full = rule_files.quality_window(ruleset, name)
    tiny_recs = tiny_rules.benchmark_rules(ruleset, name, benchmarks.get(bench))
    tiny = next(
        str(e["KEY"]["ATLEAST_ONE_CHECK"]).strip()
        for e in tiny_recs
        if "KEY" in e and e["KEY"].get("ATLEAST_ONE_CHECK")
    )
    for q in benchmarks.get(bench).rules.quality:
        assert _bound(full, q.direction, q.metric) == q.full, (ruleset, full)
        assert _bound(tiny, q.direction, q.metric) == q.tiny, (ruleset, tiny)


def test_a_ruleset_that_does_not_list_the_benchmark_is_one_line(mlperf):
    p = mlperf("run", "gpt3", "--ruleset", "6.1.0", "--dry-run")
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        "error: --ruleset 6.1.0: that ruleset does not list gpt3; the rulesets that do: 3.0.0, 3.1.0, 4.0.0, 4.1.0"
    ]
    with pytest.raises(ConfigError, match="does not list llama2_70b_lora; the rulesets that do: 4.0.0"):
        rulesets.for_run("llama2_70b_lora", round_name="v3.1")
    with pytest.raises(ConfigError, match="give one of them"):  # never one silently over the other
        rulesets.for_run("llama2_70b_lora", "4.0.0", "v5.0")


def test_tiny_rules_hold_a_tiny_log_to_its_rulesets_keys():
    """6.1.0's tiny rules require the disclosure keys (from the package's common.yaml, not ours):
    the same log without one of them passes under 5.0.0 and fails under 6.1.0."""
    import yaml

    def required(rs):
        recs = yaml.safe_load(Path(tiny_rules.config_path(rs)).read_text())
        return {e["KEY"]["NAME"] for e in recs if "KEY" in e and e["KEY"].get("REQ") == "EXACTLY_ONE"}

    assert "lowest_numerical_precision_in_linear" in required("6.1.0")
    assert "lowest_numerical_precision_in_linear" not in required("5.0.0")
    assert "harness_size" in required("6.1.0") and "harness_size" in required("4.0.0")
    # only our benchmarks, under the ruleset's names, and each chains its own tiny file
    recs = yaml.safe_load(Path(tiny_rules.config_path("5.1.0")).read_text())
    bench = next(e["KEY"] for e in recs if "KEY" in e and e["KEY"]["NAME"] == "submission_benchmark")
    assert bench["CHECK"].strip() == "v['value'] in ['flux1', 'llama2_70b_lora', 'llama31_8b', 'rgat']"
    assert "/tiny_rules.yaml" in bench["POST"] and "closed_" not in bench["POST"]


def test_a_replacement_for_a_key_the_ruleset_lacks_is_refused():
    import dataclasses

    gpt3 = benchmarks.get("gpt3")
    bench = dataclasses.replace(gpt3)  # its own `rules`, changed below; the registry's stays as it is
    bench.__dict__["rules"] = gpt3.rules.model_copy(update={"tiny_rules": {"no_such_key": {"CHECK": "True"}}})
    with pytest.raises(
        ConfigError, match="tiny_rules.no_such_key: training_4.1.0/closed_gpt3.yaml has no such key"
    ):
        tiny_rules.benchmark_rules("4.1.0", "gpt3", bench)


def test_closed_literals_are_read_per_ruleset_and_refuse_set():
    vals = tiny_rules.closed_values(benchmarks.get("gpt3"), "4.1.0", "full")
    assert vals["opt_base_learning_rate"][0] == (2e-5, 3e-5)
    assert vals["opt_base_learning_rate"][2] == "training_4.1.0/closed_gpt3.yaml"
    assert tiny_rules.closed_values(benchmarks.get("gpt3"), "4.1.0", "tiny")["max_sequence_length"][0] == (
        64,
    )
    with pytest.raises(
        ConfigError, match=r"'lora_rank' is fixed at 16 .* training_5\.0\.0/closed_llama2_70b_lora\.yaml"
    ):
        resolve_runs(
            benchmarks.get("llama2_70b_lora"),
            "cpu-local",
            runs=1,
            seed=0,
            sets=["lora_rank=8"],
            ruleset="5.0.0",
        )


def _logged_hyperparameters(bench: str) -> tuple[str, ...]:
    """The typed config fields the benchmark's training code logs in its header (read from its
    train.py without importing it: torch and the model stack are not needed to know the names)."""
    src = (Path(benchmarks.__file__).parents[1] / "reference_impls" / bench / "train.py").read_text()
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "HYPERPARAMETERS":
            return ast.literal_eval(node.value)
    raise AssertionError(f"no HYPERPARAMETERS in reference_impls/{bench}/train.py")


def test_a_full_size_6_1_0_header_meets_the_closed_rules(tmp_path):
    """The header `mlperf run llama2_70b_lora --system dgx-h100x8` logs, followed by the loop's
    events, passes the official checker with the closed 6.1.0 rules (all 29 required keys)."""
    from mlperf_logging.compliance_checker import mlp_compliance

    from harness.core.mllog import MLLog

    r = resolve_runs(benchmarks.get("llama2_70b_lora"), "dgx-h100x8", runs=1, seed=1, results_dir=tmp_path)
    plan = r.plans[0]
    assert plan.ruleset == "6.1.0" and plan.size == "full"
    hp = {
        "global_batch_size": plan.config["global_batch_size"],
        "gradient_accumulation_steps": plan.layout.grad_accum,
    }
    hp |= {f: plan.config[f] for f in _logged_hyperparameters("llama2_70b_lora")}
    log = MLLog(str(tmp_path / "full.log"))
    log.header(plan, hp)
    log.event("train_samples", 3901)
    log.event("eval_samples", 173)
    log.init_stop()
    log.run_start()
    log.start("block_start", None, {"samples_count": 0, "epoch_count": 1, "first_epoch_num": 0})
    log.event("eval_accuracy", 0.92, {"samples_count": 3072})
    log.end("block_stop", None, {"first_epoch_num": 0, "samples_count": 3072})
    log.run_stop(True)
    log.close()

    def check(path):
        mlp_compliance.enqueued_configs.clear()
        checker = mlp_compliance.make_checker("training", "6.1.0", True, False)
        ok = checker.check_file(str(path), "training_6.1.0/common.yaml")
        return ok, [*checker.overwritable.values(), *checker.not_overwritable]

    ok, msgs = check(tmp_path / "full.log")
    assert ok, msgs
    # and it can fail: the same log without one disclosure key
    lines = (tmp_path / "full.log").read_text().splitlines()
    (tmp_path / "cut.log").write_text("\n".join(x for x in lines if '"micro_batch_size"' not in x) + "\n")
    ok, msgs = check(tmp_path / "cut.log")
    assert not ok and any("micro_batch_size" in m for m in msgs), msgs


def test_benchmarks_show_lists_the_rulesets_and_what_changed(mlperf):
    """Computed from the package: gnn's rename at 5.0.0 and 6.1.0's nine disclosure keys for llama2."""
    import json

    p = mlperf("benchmarks", "show", "gnn", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [r["ruleset"] for r in doc["rulesets"]] == ["4.0.0", "4.1.0", "5.0.0", "5.1.0"]
    assert doc["default_ruleset"]["name"] == "rgat"
    step = {(c["from"], c["to"]): c["changes"] for c in doc["changes"]}
    assert step[("4.1.0", "5.0.0")]["name"] == "gnn -> rgat"
    assert all("quality_window" not in c for c in step.values())  # 0.72 throughout
    p = mlperf("benchmarks", "show", "llama2_70b_lora", "--json")
    step = {(c["from"], c["to"]): c["changes"] for c in json.loads(p.stdout)["changes"]}
    added = {k[2:] for k in step[("6.0.0", "6.1.0")]["required_keys"] if k.startswith("+ ")}
    assert added == DISCLOSED
    assert "- submission_status" in step[("4.0.0", "4.1.0")]["required_keys"]
    text = mlperf("benchmarks", "show", "sd")
    assert text.returncode == 0 and "5.0.0 (default)" in text.stdout


def test_a_full_size_dry_run_shows_the_ruleset_and_its_closed_hyperparameters(mlperf):
    """Issue 23's done-when: `run llama2_70b_lora --system dgx-h100x8 --dry-run --json` names the
    ruleset with its source and every closed hyperparameter of 6.1.0's closed file, each with
    the file it comes from and the value the log will carry (none left unknown). Fails if the
    table is read from another ruleset, drops a key of the package file, or leaves a value the
    runtime logs from its own state (gradient_accumulation_steps, from the layout) empty."""
    import json

    p = mlperf("run", "llama2_70b_lora", "--system", "dgx-h100x8", "--dry-run", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["ruleset"]["name"] == "6.1.0" and "training_6.1.0" in doc["ruleset"]["source"]
    rows = {r["key"]: r for r in doc["closed_hyperparameters"]}
    package = {r.name for r in rule_files.closed_hyperparameters("6.1.0", "llama2_70b_lora")}
    assert package <= set(rows), package - set(rows)
    # a value the package file does not give (it only requires the key) comes from the training
    # rules' text, kept in benchmark.yaml with its source named
    for r in rows.values():
        assert r["source"] in (
            "training_6.1.0/closed_llama2_70b_lora.yaml",
            "benchmarks/llama2_70b_lora/benchmark.yaml fixed",
        ), r
    assert all(r["value"] is not None for r in rows.values()), rows
    assert rows["gradient_accumulation_steps"]["value"] == 1 and rows["global_batch_size"]["value"] == 64


def test_plan_follows_the_ruleset_and_says_which(mlperf):
    """`mlperf plan --ruleset`: the samples to converge come from that ruleset's RCPs (SD's changed
    at 5.0.0, so the prediction moves), and the text output names the ruleset. Fails if plan reads
    one ruleset's RCPs whatever is asked, or renders without saying which it used."""
    import json

    got = {}
    for rs in ("4.0.0", "5.0.0"):
        p = mlperf("plan", "sd", "--system", "dgx-h100x8", "--ruleset", rs, "--json")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert doc["ruleset"] == rs
        got[rs] = doc["predicted_min"]
    assert got["4.0.0"] != got["5.0.0"], got
    text = mlperf("plan", "sd", "--system", "dgx-h100x8", "--round", "v4.0")
    assert text.returncode == 0 and "ruleset: 4.0.0 (samples to converge from its RCPs)" in text.stdout
