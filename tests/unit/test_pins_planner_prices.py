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
