"""What the planner prices is the run `mlperf run` would start (harness/planner/workloads.py,
benchmarks/costs.py): settings of the resolved config that change the harness's time reach the
prediction, and a tiny benchmark without calibration is one line. Found unpinned by
bench/mutation.py."""

from __future__ import annotations

import dataclasses

import pytest

import benchmarks
from harness import planner
from harness.core.errors import ConfigError
from harness.planner import hardware, stacks
from harness.planner import params as P
from harness.planner import workloads as W


def _best(bench: str, system: str, *sets: str, size=None):
    return planner.price_run(benchmarks.get(bench), system, size=size, sets=sets).options[0]


def test_sequence_parallelism_is_priced_as_reduce_scatter_and_all_gather():
    """TP 2 on GPUs: with sequence parallelism the harness's GPT moves half the bytes per layer
    (all-gather + reduce-scatter instead of all-reduces), so less exposed TP time."""
    base = ("tensor_model_parallel_size=2", "micro_batch_size=4")
    off = _best("gpt3", "dgx-h100x1", *base, "sequence_parallel=false", size="tiny")
    on = _best("gpt3", "dgx-h100x1", *base, "sequence_parallel=true", size="tiny")
    assert off.candidate.impl == on.candidate.impl == "harness"
    assert 0 < on.time["breakdown_s"]["tp"] < off.time["breakdown_s"]["tp"]
    assert on.time["breakdown_s"]["compute"] == off.time["breakdown_s"]["compute"]


def test_the_evaluation_micro_batch_is_priced():
    """llama2_70b_lora's harness evaluates with `eval_micro_batch_size`, not the training one."""
    one = _best("llama2_70b_lora", "dgx-h100x8", "eval_micro_batch_size=1")
    four = _best("llama2_70b_lora", "dgx-h100x8", "eval_micro_batch_size=4")
    assert one.candidate.mbs == four.candidate.mbs == 1
    assert four.time["eval_s"] != pytest.approx(one.time["eval_s"], rel=1e-3)


def test_a_tiny_benchmark_without_calibration_is_one_line():
    with benchmarks.scratch():
        bench = benchmarks.register(dataclasses.replace(benchmarks.get("gpt3"), name="uncalibrated"))
        w = W.get(bench, bench.default_config(), "tiny")  # priced at the tiny size: no RCPs
        with pytest.raises(ConfigError) as e:
            W.samples_to_converge(w, 16)
    assert str(e.value).startswith("no tiny samples to converge for uncalibrated")
    assert "--calibrate RUN_DIR" in str(e.value)


# ---- GPT-3 175B's cost model (benchmarks/gpt3/cost.py) -------------------------------------------
GPT3 = benchmarks.get("gpt3")


def test_the_runner_gets_the_recompute_and_the_optimizer_the_memory_model_assumed():
    tight = planner.best_config(GPT3, hardware.from_catalogue("NVIDIA H200-SXM5-141GB", 4, 8))
    assert tight["activation_recompute"] == "selective"  # 32 H200s hold 175B only with recompute
    assert tight["distributed_optimizer"] is True
    roomy = planner.best_config(GPT3, "dgx-h100x8")  # 64 H100s: no recompute needed, none asked
    assert "activation_recompute" not in roomy and roomy["distributed_optimizer"] is True


@pytest.mark.parametrize("gbs,lr", [(3072, 2e-5), (4096, 3e-5)])
def test_the_closed_learning_rate_follows_the_global_batch(gbs, lr):
    assert planner.best_config(GPT3, "dgx-h100x8", gbs)["opt_base_learning_rate"] == lr


def test_samples_and_evaluations_of_a_full_size_prediction():
    best = planner.plan(GPT3, "dgx-h100x64", global_batch_size=2304).options[0]
    # the RCP at GBS 2304: 1,189,085,184 tokens to converge, 2048 tokens a sequence
    assert best.time["samples_to_converge"] == pytest.approx(1_189_085_184 / 2048) == 580_608
    # an evaluation every ceil(24576 / 2304) = 11 steps = 25,344 sequences: 580,608 // 25,344 = 22
    assert best.time["evals"] == 22


def test_full_recompute_reruns_the_forward():
    """Training FLOPs are 3x the forward: recomputing it adds a third to the compute time."""
    base = ("tensor_model_parallel_size=2", "micro_batch_size=4")
    none = _best("gpt3", "dgx-h100x1", *base, "activation_recompute=none", size="tiny")
    full = _best("gpt3", "dgx-h100x1", *base, "activation_recompute=full", size="tiny")
    assert full.time["breakdown_s"]["compute"] == pytest.approx(none.time["breakdown_s"]["compute"] * 4 / 3)


def test_the_record_search_space():
    """NVIDIA's GPT-3 runs micro-batches 1, 2 and 4 and context parallelism 1 or 2."""
    plan = planner.plan(GPT3, "dgx-h100x8", stack=stacks.parse("nvidia-ngc@24.04"))
    assert plan.options[0].candidate.impl == "record"
    assert {o.candidate.mbs for o in plan.options} == {1, 2, 4}
    assert {o.candidate.cp for o in plan.options} == {1, 2}


def test_the_distributed_optimizer_only_where_the_harness_uses_it():
    """On GPUs the harness runs GPT-3 with the distributed optimizer (the plan's memory assumes it);
    a CPU run (gloo) keeps its config's setting, off."""
    from harness.planner.report import option_json

    for system, on in (("cpu-local", False), ("dgx-h100x1", True)):
        plan = planner.price_run(GPT3, system, size="tiny", sets=("micro_batch_size=2",))
        assert option_json(plan.options[0], plan)["layout"]["distributed_optimizer"] is on, system


def test_parameter_counts_are_whole_numbers():
    """`mlperf run --dry-run --build` prints the planner's counts with thousands separators."""
    from benchmarks.gpt3.config import Gpt3Config

    tiny = Gpt3Config(
        num_layers=2,
        hidden_size=64,
        num_attention_heads=4,
        ffn_hidden_size=256,
        max_sequence_length=64,
        vocab_size=256,
        global_batch_size=16,
    )
    total = P.parameters(GPT3, tiny)["total"]
    assert type(total) is int and total == 120_576  # configs/tiny.yaml's count
    per_rank = P.rank_bytes(GPT3, tiny, {"tp": 2, "pp": 2})["parameters_rank"]
    # PP 2: one layer on one of TP 2 ranks (25,184: test_pins_planner_memory), V/2 x h, positions s x h
    assert type(per_rank) is int and per_rank == 25_184 + 128 * 64 + 64 * 64
