"""The full-size model config (GPU path, never built here) follows the per-system switches."""

from __future__ import annotations

import pytest

from benchmarks import typed_config
from harness.run.execute import make_plans


@pytest.mark.parametrize(
    "system, tp, pp, vp, graphs", [("dgx-h100x64", 4, 8, 4, "none"), ("dgx-h100x1452", 4, 6, 8, "local")]
)
def test_full_size_transformer_config_matches_nvidia_layout(tmp_path, system, tp, pp, vp, graphs):
    from reference_impls.gpt3 import model as gm

    plan = make_plans("gpt3", system, size="full", runs=1, seed=1, results_dir=tmp_path)[0]
    t = gm.transformer_config(typed_config(plan), plan.layout, "cuda:0")
    assert (t.num_layers, t.hidden_size, t.num_attention_heads, t.ffn_hidden_size) == (96, 12288, 96, 49152)
    assert (t.tensor_model_parallel_size, t.pipeline_model_parallel_size) == (tp, pp)
    assert t.virtual_pipeline_model_parallel_size == vp
    assert t.sequence_parallel and t.tp_comm_overlap and t.bf16 and t.fp8 == "hybrid"
    assert t.fp8_amax_history_len == 1024 and t.cuda_graph_impl == graphs
    assert t.hidden_dropout == t.attention_dropout == 0.0 and t.init_method_std == 0.006
    assert not t.use_cpu_initialization


def test_cpu_config_is_fp32_local_and_gpu_switches_are_refused(tmp_path):
    from harness.core.errors import ConfigError
    from reference_impls.gpt3 import model as gm

    plan = make_plans("gpt3", "cpu-local", size="tiny", runs=1, seed=1, results_dir=tmp_path)[0]
    cfg = typed_config(plan)
    t = gm.transformer_config(cfg, plan.layout, "cpu")
    assert not t.bf16 and t.fp8 is None and not t.sequence_parallel and t.use_cpu_initialization
    with pytest.raises(ConfigError, match="distributed_optimizer=true needs a GPU"):
        make_plans(
            "gpt3", "cpu-local", size="tiny", sets=("distributed_optimizer=true",), results_dir=tmp_path
        )
    make_plans(
        "gpt3",
        "dgx-h100x1",
        size="tiny",
        sets=("distributed_optimizer=true",),
        nproc_per_node=1,
        results_dir=tmp_path,
    )
