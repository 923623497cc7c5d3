"""Step timing and peak memory, the same way on CUDA and (for the CPU smoke test) on the CPU.

On CUDA each step is timed between CUDA events (device time, no host clock around asynchronous work),
after warm-up steps that keep kernel selection, allocator growth and lazy initialisation out of the
figure; the median over the timed steps is reported with the spread (min, max) beside it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def reset_memory(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_memory_gib(device: str) -> float | None:
    import torch

    return torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None


def time_steps(step: Callable[[], object], device: str, warmup: int, iters: int) -> dict:
    """Run `step` warmup + iters times; {'step_s': median, 'step_s_min', 'step_s_max', 'iters'}."""
    import torch

    cuda = device.startswith("cuda")
    for _ in range(warmup):
        step()
    times = []
    for _ in range(iters):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
    return {
        "step_s": statistics.median(times),
        "step_s_min": min(times),
        "step_s_max": max(times),
        "iters": iters,
    }
