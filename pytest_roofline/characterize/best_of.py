"""Best-of timing: the fastest of several runs is the one least disturbed by other work on the machine."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable

CLEAN_SHARE = 0.9


def _process_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def best_seconds(run: Callable[[], object], *, warmup: int = 1, min_repeats: int = 3, max_repeats: int = 50,
                 budget_s: float = 0.3, threads: int | None = None) -> float:
    """Minimum wall time of ``run()`` over at least ``min_repeats`` calls, more while under ``budget_s``.

    With ``threads``, a call counts as clean only if the process got CPU time on all of them for the
    whole call (getrusage); the minimum is then taken over clean calls when there are any, because a call
    that waited for a CPU measures the other work on the machine, not the hardware.
    """
    for _ in range(warmup):
        run()
    clean: list[float] = []
    dirty: list[float] = []
    spent = 0.0
    while len(clean) < min_repeats or (spent < budget_s and len(clean) + len(dirty) < max_repeats):
        cpu_before = _process_cpu_seconds()
        start = time.perf_counter()
        run()
        elapsed = time.perf_counter() - start
        used = _process_cpu_seconds() - cpu_before
        spent += elapsed
        if threads is None or used >= CLEAN_SHARE * threads * elapsed:
            clean.append(elapsed)
        else:
            dirty.append(elapsed)
        if len(clean) + len(dirty) >= max_repeats or (spent >= 2 * budget_s and len(clean) + len(dirty) >= min_repeats):
            break
    return min(clean or dirty)
