"""Best-of timing: the fastest of several runs is the one least disturbed by other work on the machine."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_seconds(run: Callable[[], object], *, warmup: int = 1, min_repeats: int = 3, max_repeats: int = 50,
                 budget_s: float = 0.3) -> float:
    """Minimum wall time of ``run()`` over at least ``min_repeats`` calls, more while under ``budget_s``."""
    for _ in range(warmup):
        run()
    best = float("inf")
    spent = 0.0
    repeats = 0
    while repeats < min_repeats or (spent < budget_s and repeats < max_repeats):
        start = time.perf_counter()
        run()
        elapsed = time.perf_counter() - start
        best = min(best, elapsed)
        spent += elapsed
        repeats += 1
    return best
