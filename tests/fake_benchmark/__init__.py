"""A fake benchmark, added the way NOTES.md "Adding a benchmark" says: its folder (bert/:
benchmark.yaml, configs/tiny.yaml), a typed config, a cost model from the shared formulas, lazy
references to its training and data code, and one registration. tests/integration/
test_fake_benchmark.py registers it in a scratch registry and runs the CLI on it.

    python -m tests.fake_benchmark --plan plan.json      (what `mlperf prepare bert` starts)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.base import BenchmarkConfig
from benchmarks.benchmark import Benchmark
from benchmarks.costs import Cost, Recompute, Workload, dense_transformer_fwd_flops, replicated_adam_bytes
from harness.core.benchmark import Implementation, RunOutcome, lazy
from harness.core.data_manifest import DataManifest


class FakeBertConfig(BenchmarkConfig):
    """A small encoder's shape; nothing trains it (the fields' meaning is in their names)."""

    global_batch_size: int = 256
    num_layers: int = 24
    hidden_size: int = 1024  # FFN 4x
    max_sequence_length: int = 512
    vocab_size: int = 30522
    data_seed: int = 1  # what the fake data is generated from

    def lowest_precision(self, device: str) -> dict[str, str]:
        return {"linear": "fp32", "attn": "fp32", "comm": "fp32"}


class FakeBertCost(Cost):
    """A dense transformer (the shared formula), replicated with Adam: nothing of its own."""

    def parameters(self, cfg: FakeBertConfig) -> dict[str, int]:
        h = cfg.hidden_size
        n = cfg.num_layers * 12 * h * h + cfg.vocab_size * h
        return {"total": n, "trainable": n}

    def rank_bytes(self, cfg: FakeBertConfig, layout: Any, device: str = "cuda") -> dict[str, float]:
        return replicated_adam_bytes(self.parameters(cfg)["total"])

    def workload(self, cfg: FakeBertConfig, size: str) -> Workload:
        h, s = cfg.hidden_size, cfg.max_sequence_length
        fwd = dense_transformer_fwd_flops(cfg.num_layers, h, 4 * h, s, cfg.vocab_size)
        return Workload.fully_trained(
            fwd,
            self.parameters(cfg)["total"],
            kind="dp",
            precision="bf16",
            cfg=cfg,
            size=size,
            layers=cfg.num_layers,
            hidden=h,
            seq=s,
            vocab=cfg.vocab_size,
            recompute={"none": Recompute(34, 0.0)},
            act_gib_per_sample=0.1,
        )


def train(rt: Any) -> RunOutcome:
    """Never run by the test (it stops at --dry-run)."""
    return RunOutcome(False)


def prepare(plan: Any) -> None:
    """Tiny: one generated file, then the one manifest shape."""
    root = Path(plan.data_dir)
    root.mkdir(parents=True, exist_ok=True)
    (root / "tokens.bin").write_bytes(bytes(range(256)) * plan.config["data_seed"])
    DATA.write(plan, [root / "tokens.bin"], {"generated": True})


DATA = DataManifest(fields=("max_sequence_length",), tiny_fields=("data_seed",))

BENCHMARK = Benchmark(
    name="bert",
    config=FakeBertConfig,
    folder=Path(__file__).resolve().parent / "bert",
    cost=FakeBertCost(),
    impl=Implementation(
        module="tests.fake_benchmark",
        train=lazy("tests.fake_benchmark:train"),
        prepare=lazy("tests.fake_benchmark:prepare"),
        data=DATA,
    ),
)
