"""How long a gpt3 rank spends importing torch and megatron-core, against a baseline in the same run.

    python bench/bench_rank_import.py [--repeat 8]
    # against another megatron-core (and the cpu_compat of the commit that ran it), same interpreter:
    pip install --no-deps --target /tmp/m16 megatron-core==0.16.1 && git worktree add /tmp/old <commit>
    python bench/bench_rank_import.py --baseline-path /tmp/m16:/tmp/old
    # against another interpreter / torch build too:
    python bench/bench_rank_import.py --baseline-python /tmp/py311/bin/python --baseline-path /tmp/old

Goal (issue 26): a rank's megatron import within 20 % of the release before. Each case starts a
fresh interpreter; the cases run interleaved, so a busy hour slows both alike. Prints the median and
best of `import torch` alone and of the whole rank import (cpu_compat.enable() + every megatron
module the gpt3 rank imports, as in reference_impls/megatron_gpt/{train,model,data,dist_ckpt}.py), and the
ratio of the megatron part (whole - torch) to the baseline's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TORCH = "import time; t = time.perf_counter(); import torch; print(time.perf_counter() - t)"
# The megatron modules a gpt3 rank imports (train.py, model.py, data.py, dist_ckpt.py).
RANK = """import time; t = time.perf_counter()
from reference_impls.megatron_gpt import cpu_compat; cpu_compat.enable()
from megatron.core import parallel_state, dist_checkpointing
from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
from megatron.core.models.gpt.gpt_model import GPTModel
from megatron.core.models.gpt import gpt_layer_specs
from megatron.core.optimizer import get_megatron_optimizer
from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler
from megatron.core.datasets.gpt_dataset import GPTDataset
from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
from megatron.core.dist_checkpointing.strategies.fully_parallel import FullyParallelSaveStrategyWrapper
print(time.perf_counter() - t)"""


def once(python: str, path: str, code: str) -> float:
    env = {**os.environ, "PYTHONPATH": path, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=8)
    ap.add_argument("--baseline-python", default=sys.executable)
    ap.add_argument("--baseline-path", help="PYTHONPATH of the baseline (its megatron, its repository)")
    a = ap.parse_args()
    cases = {"this tree": (sys.executable, str(ROOT))}
    if a.baseline_path:
        cases = {"baseline": (a.baseline_python, a.baseline_path), **cases}
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(a.repeat):
        for name, (py, path) in cases.items():
            for what, code in (("torch", TORCH), ("rank", RANK)):
                times.setdefault((name, what), []).append(once(py, path, code))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{'case':12s} {'torch s':>8s} {'rank s':>8s} {'best rank':>10s} {'megatron part s':>16s}")
    for name in cases:
        part = med[(name, "rank")] - med[(name, "torch")]
        best = min(times[(name, "rank")])
        print(f"{name:12s} {med[(name, 'torch')]:8.3f} {med[(name, 'rank')]:8.3f} {best:10.3f} {part:16.3f}")
    if a.baseline_path:
        r = med[("this tree", "rank")] / med[("baseline", "rank")]
        p = (med[("this tree", "rank")] - med[("this tree", "torch")]) / (
            med[("baseline", "rank")] - med[("baseline", "torch")]
        )
        print(f"whole rank import x{r:.3f} of the baseline; megatron part x{p:.3f} (medians of {a.repeat})")


if __name__ == "__main__":
    main()
