"""Timing a callable bare: warm-up, then rounds until the median is stable or the budget is spent.

Each call is timed on its own with ``time.perf_counter`` (the same clock a user would use by hand), with a
device synchronization inside the timed interval when the work runs asynchronously (CUDA). Nothing else
runs in the timed interval: no dispatch mode, no hooks. The page faults of every call are counted just
outside it (``getrusage`` deltas), because a call that touches fresh memory runs at a different speed from
one that does not, and the verdict must say which one it measured.

The budget (``max_time_s``) covers the whole measurement, warm-up included, with one exception: at least
``min_warmup`` warm-up calls and ``min_rounds`` timed calls always run, so a call longer than the budget
gets exactly those and ``budget_limited`` says so.
"""

from __future__ import annotations

import math
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from pytest_roofline.fixture_types import Setup
from pytest_roofline.record.region_record import TimingRecord

T = TypeVar("T")

# Per-call samples kept in results.json; longer runs keep this many spread evenly over the run (the statistics
# use them all).
MAX_EXPORTED_SAMPLES = 1000


@dataclass(frozen=True)
class TimingPolicy:
    """How long and how often to time one region."""

    max_time_s: float = 1.0  # the whole measurement: warm-up and timed calls
    min_rounds: int = 3
    max_rounds: int = 100_000  # a 3 us call spans min_time_s = 0.25 s in about 80,000 calls
    first_batch: int = 5  # timed calls before the first stability check
    min_warmup: int = 2  # warm-up calls wanted; only 1 when the budget has no room for more
    max_warmup: int = 50
    # Fault-free warm-up calls in a row before timing starts: one is not steady state. glibc keeps the
    # freed output of a posix_memalign'd block unusable for a same-sized request until small neighbours
    # are freed too, so a fresh process can go 0, 2048, 2048, ... faults before it settles (see allocator.py).
    quiet_warmup: int = 3
    warmup_share: float = 0.5  # warm-up stops before it uses more than this share of the budget
    rel_tolerance: float = 0.01  # stop when the median moves less than this between checks
    # The timed calls span at least this long before the median may be called stable. Ten calls of a 0.5 ms
    # LSTM or a 3 us add sample one instant of a shared host: their session medians vary several times more
    # than when the calls span a quarter of a second (docs/noise.md; benchmarks/gate_stability.py --compare).
    min_time_s: float = 0.0

    def __post_init__(self) -> None:
        if not (self.max_time_s > 0 and math.isfinite(self.max_time_s)):
            raise ValueError(f"max_time_s must be a positive number of seconds, got {self.max_time_s!r}")
        if not (self.min_time_s >= 0 and math.isfinite(self.min_time_s)):
            raise ValueError(f"min_time_s must be a number of seconds >= 0, got {self.min_time_s!r}")
        if self.min_rounds < 1 or self.max_rounds < self.min_rounds:
            raise ValueError(f"need 1 <= min_rounds <= max_rounds, got {self.min_rounds}, {self.max_rounds}")
        if self.quiet_warmup < 1:
            raise ValueError(f"need quiet_warmup >= 1, got {self.quiet_warmup}")
        if self.min_warmup < 1 or self.max_warmup < self.min_warmup:
            raise ValueError(f"need 1 <= min_warmup <= max_warmup, got {self.min_warmup}, {self.max_warmup}")


DEFAULT_POLICY = TimingPolicy()


@dataclass(frozen=True)
class TimingStats:
    """Per-call times of the timed rounds, in seconds, and the page faults taken by those calls."""

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
    samples_s: tuple[float, ...] = ()
    minor_faults: tuple[int, ...] = ()  # per timed call, same order as samples_s
    major_faults: tuple[int, ...] = ()
    measure_s: float = 0.0  # wall time of the whole measurement, warm-up included
    budget_limited: bool = False  # only the minimum number of calls ran: the budget was spent

    @property
    def iqr_rel(self) -> float:
        """Interquartile range relative to the median: the spread we report."""
        return (self.q3_s - self.q1_s) / self.median_s if self.median_s > 0 else 0.0

    @property
    def cv(self) -> float:
        return self.stdev_s / self.mean_s if self.mean_s > 0 else 0.0

    @property
    def faults_per_call(self) -> float:
        """Median minor + major page faults of a timed call (0 when the call reuses warm memory)."""
        if not self.minor_faults:
            return 0.0
        return float(statistics.median(a + b for a, b in zip(self.minor_faults, self.major_faults, strict=True)))

    def to_dict(self) -> TimingRecord:
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
            "measure_s": self.measure_s,
            "budget_limited": self.budget_limited,
            "faults_per_call": self.faults_per_call,
            "samples_s": _spread(self.samples_s),
            "minor_faults": _spread(self.minor_faults),
            "major_faults": _spread(self.major_faults),
        }


def _spread(values: Sequence[T], keep: int = MAX_EXPORTED_SAMPLES) -> list[T]:
    """At most ``keep`` of ``values``, evenly spaced over them and in order (all of them when they fit): a
    long run's export then shows its whole span, not only its start."""
    if len(values) <= keep:
        return list(values)
    return [values[(i * len(values)) // keep] for i in range(keep)]


def summarize(samples: Sequence[float], warmup_rounds: int = 0, stable: bool = True, *,
              minor_faults: Sequence[int] = (), major_faults: Sequence[int] = (), measure_s: float = 0.0,
              budget_limited: bool = False) -> TimingStats:
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
        samples_s=tuple(samples),
        minor_faults=tuple(minor_faults),
        major_faults=tuple(major_faults),
        measure_s=measure_s,
        budget_limited=budget_limited,
    )


def page_faults() -> tuple[int, int]:
    """(minor, major) page faults of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt, usage.ru_majflt


def prepared_arguments(setup: Setup | None, args: tuple[object, ...],
                       kwargs: Mapping[str, object]) -> tuple[tuple[object, ...], dict[str, object]]:
    """Run ``setup`` (untimed) and return the arguments of the next call: the ones ``setup`` returned as
    ``(args, kwargs)``, or the original ones when it returned None (it reset their state in place)."""
    if setup is None:
        return args, dict(kwargs)
    fresh = setup()
    if fresh is None:
        return args, dict(kwargs)
    try:
        new_args, new_kwargs = fresh
        return tuple(new_args), dict(new_kwargs)
    except (TypeError, ValueError):
        raise TypeError(f"measure(setup=...): setup must return None or (args, kwargs), got {fresh!r}") from None


@dataclass
class _Calls:
    """Runs and times single calls, counting each one's page faults outside its timed interval."""

    fn: Callable[..., object]
    arguments: Callable[[], tuple[tuple[object, ...], dict[str, object]]]  # untimed: the setup step, if any
    sync: Callable[[], None]
    clock: Callable[[], float]
    faults: Callable[[], tuple[int, int]]
    # e.g. a live roof probe; untimed. True: it evicted the call's data, so one untimed call puts it back.
    before_timed: Callable[[float], bool | None] | None = None
    flush: Callable[[], object] | None = None  # untimed, after the setup, before each timed call: a GPU's L2
    times: list[float] = field(default_factory=list)
    minor: list[int] = field(default_factory=list)
    major: list[int] = field(default_factory=list)

    def run(self, timed: bool = False) -> tuple[float, int, int]:
        args, kwargs = self.arguments()
        if timed and self.flush is not None:
            self.flush()  # after the setup, which may have written the call's inputs into the cache
        minor0, major0 = self.faults()
        self.sync()
        start = self.clock()
        self.fn(*args, **kwargs)
        self.sync()
        elapsed = self.clock() - start
        minor1, major1 = self.faults()
        return elapsed, minor1 - minor0, major1 - major0

    def run_timed(self) -> float:
        if self.before_timed is not None and self.before_timed(self.times[-1] if self.times else 0.0):
            self.run()
        elapsed, minor, major = self.run(timed=True)
        self.times.append(elapsed)
        self.minor.append(minor)
        self.major.append(major)
        return elapsed


def calls_for(fn: Callable[..., object], args: tuple[object, ...], kwargs: Mapping[str, object] | None, *,
              setup: Setup | None = None, synchronize: Callable[[], None] | None = None,
              clock: Callable[[], float] = time.perf_counter) -> _Calls:
    """Single timed calls of ``fn`` (each after its untimed ``setup``), for loops other than
    :func:`time_callable`'s (the lockstep of ``--roofline-compare``)."""
    fixed = dict(kwargs or {})
    return _Calls(fn, lambda: prepared_arguments(setup, args, fixed), synchronize or (lambda: None), clock,
                  page_faults)


@contextmanager
def no_profile_hook() -> Iterator[None]:
    """No ``sys.setprofile`` hook on this thread while calls are timed: a hook (``--roofline-compare``'s change
    trace on Python 3.11, a coverage or profiling tool) runs Python code at every call and return and would
    slow the timed calls, so the fraction. ``sys.monitoring`` tools (3.12+) disable themselves per code object
    after its first call, so a timed call repeats at no cost."""
    previous = sys.getprofile()
    if previous is None:
        yield
        return
    sys.setprofile(None)
    try:
        yield
    finally:
        sys.setprofile(previous)


def time_callable(
    fn: Callable[..., object],
    args: tuple[object, ...] = (),
    kwargs: Mapping[str, object] | None = None,
    *,
    policy: TimingPolicy = DEFAULT_POLICY,
    synchronize: Callable[[], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    faults: Callable[[], tuple[int, int]] = page_faults,
    setup: Setup | None = None,
    before_timed_call: Callable[[float], bool | None] | None = None,
    flush: Callable[[], object] | None = None,
) -> TimingStats:
    """Median time of one call of ``fn(*args, **kwargs)``.

    Warm-up runs until first-touch page faults stop (fresh outputs fault for several calls; ``quiet_warmup``
    fault-free calls in a row count as stopped), at least
    ``min_warmup`` calls where the budget allows and always one, within ``warmup_share`` of the budget. Timed
    rounds then run in growing batches until the median moves less than ``rel_tolerance`` between checks and the
    timed calls have spanned ``min_time_s``, or until ``max_rounds`` or until the next call would overrun the
    budget (after ``min_rounds`` calls, which always run). ``setup``, if given, runs
    before every call, outside its timed interval (see :func:`prepared_arguments`); ``before_timed_call``
    (given the previous timed call's seconds) before every timed call, outside it too: the live probes; when it
    returns True, one untimed call follows it (the probe evicted the data the timed calls keep in cache).
    ``flush`` runs after each timed call's setup and before its timed interval (a GPU's L2, ``gpu_l2``); its
    time counts against the budget.
    """
    with no_profile_hook():
        return _time_calls(fn, args, kwargs, policy, synchronize, clock, faults, setup, before_timed_call, flush)


def _time_calls(fn: Callable[..., object], args: tuple[object, ...], kwargs: Mapping[str, object] | None,
                policy: TimingPolicy, synchronize: Callable[[], None] | None, clock: Callable[[], float],
                faults: Callable[[], tuple[int, int]], setup: Setup | None,
                before_timed_call: Callable[[float], bool | None] | None,
                flush: Callable[[], object] | None = None) -> TimingStats:
    fixed = dict(kwargs or {})
    calls = _Calls(fn, lambda: prepared_arguments(setup, args, fixed), synchronize or (lambda: None), clock, faults,
                   before_timed_call, flush)
    budget = policy.max_time_s
    start = clock()

    def elapsed() -> float:
        return clock() - start

    warmup = 0
    quiet = 0  # fault-free warm-up calls in a row
    last = 0.0
    while warmup < policy.max_warmup:
        last, minor, major = calls.run()
        warmup += 1
        quiet = quiet + 1 if minor + major == 0 else 0
        if elapsed() + last > policy.warmup_share * budget:
            break  # another warm-up call would eat into the timed calls' share
        if warmup >= policy.min_warmup and quiet >= policy.quiet_warmup:
            break

    previous_median: float | None = None
    timed_from = elapsed()
    stable = False
    limited = False
    batch = max(policy.first_batch, policy.min_rounds)
    while len(calls.times) < policy.max_rounds and not limited:
        for _ in range(min(batch, policy.max_rounds - len(calls.times))):
            # Do not start a call that would overrun the budget, once the minimum has run.
            estimate = statistics.median(calls.times) if calls.times else last
            if len(calls.times) >= policy.min_rounds and elapsed() + estimate > budget:
                limited = True
                break
            calls.run_timed()
        median = statistics.median(calls.times)
        settled = previous_median is not None and abs(median - previous_median) <= policy.rel_tolerance * median
        # max_rounds calls are enough samples even for a call too fast to span min_time_s with them
        if settled and (elapsed() - timed_from >= policy.min_time_s or len(calls.times) >= policy.max_rounds):
            stable = True
            break
        previous_median = median
        batch = max(batch, len(calls.times) // 2)  # grow batches so checks stay cheap for fast callables
    return summarize(calls.times, warmup, stable, minor_faults=calls.minor, major_faults=calls.major,
                     measure_s=elapsed(), budget_limited=limited and len(calls.times) <= policy.min_rounds)


class SideTurns(Protocol):
    """What :func:`side_stats` reads of ``ab.lockstep.SideTimes`` (a higher layer)."""

    @property
    def times(self) -> Sequence[float]: ...

    @property
    def warmup(self) -> int: ...

    @property
    def faults(self) -> Sequence[int]: ...


def side_stats(side: SideTurns, stable: bool, measure_s: float) -> TimingStats:
    """One side's timed turns in an A/B comparison (``ab.lockstep.SideTimes``: ``times``, ``warmup``,
    ``faults``) as the usual timing record (its median is that side's time per call)."""
    return summarize(side.times, side.warmup, stable, minor_faults=side.faults, major_faults=[0] * len(side.faults),
                     measure_s=measure_s, budget_limited=False)
