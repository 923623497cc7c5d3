"""gnn config and plans: NVIDIA's record layouts, closed-rule refusals, GPU-only switches (torch-free)."""

import pytest
from helpers import typed_config

import benchmarks
from benchmarks.gnn.config import GnnConfig
from harness.core.errors import ConfigError
from harness.run import execute as runner


@pytest.mark.parametrize(
    "system, gbs, mbs, lr, world",
    [
        ("dgx-h100x1", 16384, 2048, 0.002, 8),
        ("dgx-h200x1", 16384, 2048, 0.002, 8),
        ("dgx-h100x8", 65536, 1024, 0.003, 64),
        ("dgx-h100x64", 262144, 512, 0.005, 512),
    ],
)
def test_record_configs_resolve_to_nvidia_batch_and_lr(tmp_path, system, gbs, mbs, lr, world):
    plan = runner.resolve(benchmarks.get("rgat"), system, runs=1, seed=1, results_dir=tmp_path).plans[0]
    cfg = typed_config(plan)
    assert (plan.size, cfg.global_batch_size, cfg.opt_base_learning_rate) == ("full", gbs, lr)
    assert (plan.layout.world_size, plan.layout.dp, plan.layout.micro_batch_size, plan.layout.grad_accum) == (
        world,
        world,
        mbs,
        1,
    )
    assert (cfg.num_train_seeds, cfg.num_val_seeds) == (94_605_581, 788_379)
    assert (
        cfg.label_file == "node_label_2K.npy"
        and cfg.fan_out == [15, 10, 5]
        and plan.target == {"eval_accuracy": 0.72}
    )


def test_tiny_plan_one_and_two_ranks(tmp_path):
    one = runner.resolve(
        benchmarks.get("gnn"), "cpu-local", "tiny", runs=1, seed=1, results_dir=tmp_path
    ).plans[0]
    two = runner.resolve(
        benchmarks.get("gnn"), "cpu-local", "tiny", runs=1, seed=1, results_dir=tmp_path, nproc_per_node=2
    ).plans[0]
    assert (one.layout.dp, one.layout.grad_accum) == (1, 2) and (two.layout.dp, two.layout.grad_accum) == (
        2,
        1,
    )
    cfg = typed_config(one)
    assert (cfg.num_train_seeds, cfg.num_val_seeds, cfg.label_file) == (12_000, 1_000, "node_label_19.npy")


@pytest.mark.parametrize(
    "system, sets, message",
    [
        ("dgx-h100x8", ("hidden_channels=256",), "'hidden_channels' is fixed at 512"),
        ("cpu-local", ("fan_out=[10, 5, 3]",), "'fan_out' is fixed at [15, 10, 5]"),
        ("dgx-h100x8", ("tensor_model_parallel_size=2",), "supports data parallelism only"),
        ("dgx-h100x8", ("pipeline_model_parallel_size=2",), "supports data parallelism only"),
        ("dgx-h100x8", ("cuda_graphs=true",), "gnn implementation has no such path"),
        ("cpu-local", ("fp8=true",), "gnn implementation has no such path"),
    ],
)
def test_refusals(tmp_path, system, sets, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        runner.resolve(benchmarks.get("gnn"), system, runs=1, seed=1, results_dir=tmp_path, sets=sets)


def test_config_consistency_errors():
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        GnnConfig(hidden_channels=510)
    with pytest.raises(ValueError, match="fan_out has 2 hops but num_layers is 3"):
        GnnConfig(fan_out=[10, 5])
    with pytest.raises(ValueError, match="num_labeled_papers 10 exceeds the 5 papers"):
        GnnConfig(num_nodes={"paper": 5, "author": 1, "institute": 1, "fos": 1}, num_labeled_papers=10)
    assert GnnConfig.SUPPORTS == ()


def test_the_gpu_precision_switches_run_on_cpu_as_the_tiny_config_ships_them(tmp_path):
    """amp and fp8_features execute on CPU (test_gnn_precision.py), so CPU systems accept them."""
    for name in ("fp8_features", "amp"):
        assert GnnConfig.SWITCHES[name].on == ("cpu", "gpu")
    for system in ("cpu-local", "dgx-h100x8"):
        cfg = typed_config(
            runner.resolve(benchmarks.get("gnn"), system, runs=1, seed=1, results_dir=tmp_path).plans[0]
        )
        assert (cfg.amp, cfg.fp8_features) == (True, True)
