"""gpt3 context parallelism is refused (the loop does not split the batch per CP rank), and bf16
is a CPU switch: what `mlperf run` resolves, not what it trains (tests/integration/test_gpt3_bf16.py)."""

from __future__ import annotations

import pytest

import benchmarks
from harness.core.schema import load_yaml
from harness.run.execute import make_plans


def test_cp2_on_a_gpu_system_is_one_line_exit_2(mlperf):
    r = mlperf("run", "gpt3", "--system", "dgx-h100x64", "--set", "context_parallel_size=2", "--dry-run")
    assert r.returncode == 2, r.stdout + r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, line
    assert line.startswith("error: context_parallel_size=2") and "not split per CP rank" in line, line


def test_the_planner_never_proposes_cp_and_no_shipped_config_sets_it():
    from harness.planner.search import implementation

    assert "cp" not in implementation(benchmarks.get("gpt3"))["supports"]
    for path in benchmarks.get("gpt3").configs_dir.glob("*.yaml"):
        assert load_yaml(path).get("config", {}).get("context_parallel_size", 1) == 1, path.name


@pytest.mark.parametrize("system", ["dgx-h100x64", "gb200-nvl72"])
def test_full_size_layouts_have_no_cp(tmp_path, system):
    plan = make_plans(benchmarks.get("gpt3"), system, size="full", runs=1, seed=1, results_dir=tmp_path)[0]
    assert plan.layout.cp == 1 and plan.layout.world_size > 1


def test_bf16_resolves_on_cpu_and_builds_a_bf16_megatron_config(tmp_path):
    from helpers import typed_config

    from reference_impls.megatron_gpt import model as gm

    plan = make_plans(
        benchmarks.get("gpt3"),
        "cpu-local",
        size="tiny",
        sets=("precision=bf16",),
        runs=1,
        seed=1,
        results_dir=tmp_path,
    )[0]
    t = gm.transformer_config(typed_config(plan), plan.layout, "cpu")
    assert t.bf16 and t.params_dtype == t.pipeline_dtype and str(t.params_dtype) == "torch.bfloat16"
