"""DeepSeek-V3 671B pretraining (MLPerf Training v6.0-v6.1) as one Benchmark object: rules, typed
config, cost model and full-size configs; no implementation yet (impl None: `mlperf run` refuses it
in one line, `mlperf check`/`results` read its logs, `mlperf plan` prices it). Issue 45."""

from __future__ import annotations

from pathlib import Path

from benchmarks.benchmark import Benchmark
from benchmarks.deepseekv3_671b.config import DeepseekV3Config
from benchmarks.deepseekv3_671b.cost import COST

BENCHMARK = Benchmark("deepseekv3_671b", DeepseekV3Config, Path(__file__).resolve().parent, COST)
