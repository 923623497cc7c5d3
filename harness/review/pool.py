"""Parallel map over the machine's cores for the review side (compliance checks are CPU-bound).

Forked worker processes (the parent's imports and caches come along for free); small jobs and
single-core machines run in-process, where a pool would cost more than it saves.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def pmap(fn: Callable, items: Iterable, workers: int | None = None, min_items: int = 4) -> list:
    """[fn(x) for x in items], over `workers` processes (default: every core). `fn` must be a
    module-level function that does not raise for its inputs' contents."""
    items = list(items)
    n = min(workers or cores(), len(items))
    if n <= 1 or len(items) < min_items:
        return [fn(x) for x in items]
    import multiprocessing  # here, not at the top: ~0.1 s of start-up that serial jobs never need
    from concurrent.futures import ProcessPoolExecutor

    if "fork" not in multiprocessing.get_all_start_methods():
        return [fn(x) for x in items]
    with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork")) as ex:
        return list(ex.map(fn, items, chunksize=max(1, len(items) // (n * 4))))
