"""CPU-time measurement shared by the rollout-path bench.

Invariants: every duration is CPU time of this process, all threads (``time.process_time``:
the tokenizer's Rust threads are included), never wall time: the bench reports what the
work costs, not how long it waited for a busy machine. The garbage collector is paused
while a pass is timed (after a full collection), as ``timeit`` does.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
from collections.abc import Callable, Iterator

__all__ = ["clock", "elapsed_ms", "fastest", "timing"]


def clock() -> float:
    """CPU seconds of this process so far."""
    return time.process_time()


def elapsed_ms(start: float) -> float:
    """CPU milliseconds since ``start`` (a :func:`clock` reading)."""
    return (clock() - start) * 1e3


@contextlib.contextmanager
def timing() -> Iterator[None]:
    """Collect garbage first and pause the collector inside the block."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def fastest(fn: Callable[[], object], budget_s: float, max_reps: int) -> float:
    """CPU seconds of the fastest of repeated ``fn()`` runs.

    Runs at least once and stops after ``max_reps`` runs or ``budget_s`` CPU seconds.
    """
    best, spent, reps = math.inf, 0.0, 0
    while reps < max_reps and (reps == 0 or spent < budget_s):
        start = clock()
        fn()
        took = clock() - start
        best, spent, reps = min(best, took), spent + took, reps + 1
    return best
