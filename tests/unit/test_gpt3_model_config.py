"""The full-size model config (GPU path, never built here) follows the per-system switches."""

from __future__ import annotations

import pytest
from helpers import typed_config

import benchmarks
from harness.run.execute import make_plans


@pytest.mark.parametrize(
    "system, tp, pp, vp, graphs", [("dgx-h100x64", 4, 8, 4, "none"), ("dgx-h100x1452", 4, 6, 8, "local")]
)
def test_full_size_transformer_config_matches_nvidia_layout(tmp_path, system, tp, pp, vp, graphs):
    from reference_impls.megatron_gpt import model as gm

    plan = make_plans(benchmarks.get("gpt3"), system, size="full", runs=1, seed=1, results_dir=tmp_path)[0]
    # the record's speed switches, which the configs ship off until measured faster on a GPU
    record = {"fp8": True, "tp_comm_overlap": True, "cuda_graphs": graphs == "local"}
    t = gm.transformer_config(typed_config(plan).model_copy(update=record), plan.layout, "cuda:0")
    assert (t.num_layers, t.hidden_size, t.num_attention_heads, t.ffn_hidden_size) == (96, 12288, 96, 49152)
    assert (t.tensor_model_parallel_size, t.pipeline_model_parallel_size) == (tp, pp)
    assert t.virtual_pipeline_model_parallel_size == vp
    assert t.sequence_parallel and t.tp_comm_overlap and t.bf16 and t.fp8 == "hybrid"
    assert t.fp8_amax_history_len == 1024 and t.cuda_graph_impl == graphs
    assert t.hidden_dropout == t.attention_dropout == 0.0 and t.init_method_std == 0.006
    assert not t.use_cpu_initialization


def test_cpu_config_is_fp32_local_and_only_cuda_kernel_switches_are_refused(tmp_path):
    from harness.core.errors import ConfigError
    from reference_impls.megatron_gpt import model as gm

    sets = ("tensor_model_parallel_size=2", "sequence_parallel=true", "distributed_optimizer=true")
    plan = make_plans(
        benchmarks.get("gpt3"),
        "cpu-local",
        size="tiny",
        sets=sets,
        nproc_per_node=2,
        runs=1,
        seed=1,
        results_dir=tmp_path,
    )[0]
    t = gm.transformer_config(typed_config(plan), plan.layout, "cpu")
    assert not t.bf16 and t.fp8 is None and t.use_cpu_initialization
    assert t.sequence_parallel and t.tensor_model_parallel_size == 2  # honoured on CPU (cpu_compat)
    for key in ("fp8", "cuda_graphs"):  # tp_comm_overlap: tests/unit/test_config_fields.py
        with pytest.raises(ConfigError, match=f"{key}=true needs a GPU"):
            make_plans(
                benchmarks.get("gpt3"), "cpu-local", size="tiny", sets=(f"{key}=true",), results_dir=tmp_path
            )
