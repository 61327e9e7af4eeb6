"""Timing a callable bare: warm-up, then rounds until the median is stable.

Each call is timed on its own with ``time.perf_counter`` (the same clock a user would use by hand), with a
device synchronization inside the timed interval when the work runs asynchronously (CUDA). Nothing else
runs in the loop: no dispatch mode, no hooks.
"""

from __future__ import annotations

import math
import resource
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TimingPolicy:
    """How long and how often to time one region."""

    max_time_s: float = 1.0  # time budget for the timed rounds (warm-up has its own)
    min_rounds: int = 5
    max_rounds: int = 10_000
    warmup_time_s: float = 0.5
    min_warmup: int = 2
    max_warmup: int = 50
    rel_tolerance: float = 0.01  # stop when the median moves less than this between checks

    def __post_init__(self) -> None:
        if not (self.max_time_s > 0 and math.isfinite(self.max_time_s)):
            raise ValueError(f"max_time_s must be a positive number of seconds, got {self.max_time_s!r}")
        if self.min_rounds < 1 or self.max_rounds < self.min_rounds:
            raise ValueError(f"need 1 <= min_rounds <= max_rounds, got {self.min_rounds}, {self.max_rounds}")


DEFAULT_POLICY = TimingPolicy()


@dataclass(frozen=True)
class TimingStats:
    """Per-call times of the timed rounds, in seconds."""

    median_s: float
    min_s: float
    max_s: float
    q1_s: float
    q3_s: float
    mean_s: float
    stdev_s: float
    rounds: int
    warmup_rounds: int
    stable: bool  # the median settled within the tolerance before the budget ran out

    @property
    def iqr_rel(self) -> float:
        """Interquartile range relative to the median: the spread we report."""
        return (self.q3_s - self.q1_s) / self.median_s if self.median_s > 0 else 0.0

    @property
    def cv(self) -> float:
        return self.stdev_s / self.mean_s if self.mean_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "median_s": self.median_s,
            "min_s": self.min_s,
            "max_s": self.max_s,
            "q1_s": self.q1_s,
            "q3_s": self.q3_s,
            "mean_s": self.mean_s,
            "stdev_s": self.stdev_s,
            "iqr_rel": self.iqr_rel,
            "cv": self.cv,
            "rounds": self.rounds,
            "warmup_rounds": self.warmup_rounds,
            "stable": self.stable,
        }


def summarize(samples: list[float], warmup_rounds: int = 0, stable: bool = True) -> TimingStats:
    if not samples:
        raise ValueError("no timing samples")
    ordered = sorted(samples)
    if len(ordered) >= 2:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        stdev = statistics.stdev(ordered)
    else:
        q1 = q3 = ordered[0]
        stdev = 0.0
    return TimingStats(
        median_s=statistics.median(ordered),
        min_s=ordered[0],
        max_s=ordered[-1],
        q1_s=q1,
        q3_s=q3,
        mean_s=statistics.fmean(ordered),
        stdev_s=stdev,
        rounds=len(ordered),
        warmup_rounds=warmup_rounds,
        stable=stable,
    )


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def time_callable(
    fn: Callable[..., Any],
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    policy: TimingPolicy = DEFAULT_POLICY,
    synchronize: Callable[[], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> TimingStats:
    """Median time of one call of ``fn(*args, **kwargs)``.

    Warm-up runs until first-touch page faults stop (fresh outputs fault for several calls) and at least
    ``min_warmup`` calls, within ``warmup_time_s``. Timed rounds then run in growing batches until the
    median moves less than ``rel_tolerance`` between checks, or the budget is spent.
    """
    kwargs = dict(kwargs or {})
    sync = synchronize or (lambda: None)

    def one_call() -> float:
        sync()
        start = clock()
        fn(*args, **kwargs)
        sync()
        return clock() - start

    warmup = 0
    warm_start = clock()
    while warmup < policy.max_warmup:
        faults = _minor_faults()
        one_call()
        warmup += 1
        settled = _minor_faults() == faults
        if warmup >= policy.min_warmup and (settled or clock() - warm_start > policy.warmup_time_s):
            break

    samples: list[float] = []
    spent = 0.0
    previous_median: float | None = None
    stable = False
    batch = policy.min_rounds
    while len(samples) < policy.max_rounds:
        for _ in range(min(batch, policy.max_rounds - len(samples))):
            samples.append(one_call())
            spent += samples[-1]
            if spent > policy.max_time_s and len(samples) >= policy.min_rounds:
                break
        median = statistics.median(samples)
        if previous_median is not None and abs(median - previous_median) <= policy.rel_tolerance * median:
            stable = True
            break
        if spent > policy.max_time_s and len(samples) >= policy.min_rounds:
            break
        previous_median = median
        batch = max(batch, len(samples) // 2)  # grow batches so checks stay cheap for fast callables
    return summarize(samples, warmup, stable)
