"""Measuring regions: count the work in one pass, time the callable bare in another, judge it.

Plain Python; the pytest fixture in :mod:`pytest_roofline.plugin` is a thin wrapper around
:class:`Recorder`, and scripts can use it directly.

A *deferred* counter (``deferred = True``, the ncu counter) cannot count in this process: its regions are
timed here and kept as :class:`PendingRegion` s until the counts arrive from a profiled re-run of the test
(:meth:`Recorder.settle_pending`), or until another counter counts them after all (:meth:`Recorder.count_pending`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from pytest_roofline.counters import Counter
from pytest_roofline.devices import synchronizer
from pytest_roofline.model import KernelSample, Machine, Verdict, combine, evaluate_region
from pytest_roofline.placement import place_working_set
from pytest_roofline.report import above_one_note
from pytest_roofline.timing import (
    DEFAULT_POLICY,
    Setup,
    TimingPolicy,
    TimingStats,
    prepared_arguments,
    time_callable,
)

# How a region's time was obtained; recorded with every test in results.json.
UNPROFILED_CLOCK_POLICY: dict[str, str] = {
    "time": "bare timed loop in the pytest process: unprofiled, device-synchronized, normal clocks",
}


class CounterUnavailableError(RuntimeError):
    """The selected counter cannot count this callable (missing dependency, no declaration)."""


@dataclass(frozen=True)
class Region:
    """One measured call site: its kernels, its timing and its verdict."""

    label: str
    counter: str
    kernels: list[KernelSample]
    timing: TimingStats
    verdict: Verdict
    notes: list[str] = field(default_factory=list)
    parts: list[tuple[str, TimingStats]] = field(default_factory=list)  # call sites timed apart, then judged as one
    placement: Any = None  # cores.Placement: where it was measured (None: not placed)
    uncounted: dict[str, int] = field(default_factory=dict)  # FLOP-bearing ops without a rule -> their bytes

    def to_dict(self) -> dict[str, Any]:
        out = {
            "label": self.label,
            "counter": self.counter,
            "timing": self.timing.to_dict(),
            **self.verdict.to_dict(),
            "kernels": [k.to_dict() for k in self.kernels],
            "notes": list(self.notes),
            "uncounted_ops": dict(self.uncounted),
        }
        if self.parts:
            out["parts"] = [{"label": label, "timing": timing.to_dict()} for label, timing in self.parts]
        if self.placement is not None:
            out["cores"] = self.placement.to_dict()
        return out


@dataclass
class PendingRegion:
    """A call site timed here whose counts come later (a deferred counter such as ncu)."""

    label: str
    timing: TimingStats
    # The call, kept so that another counter can count it if profiling is unavailable; dropped once settled,
    # so a session does not hold every test's tensors.
    call: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None


def sum_timings(timings: Sequence[TimingStats]) -> TimingStats:
    """Timing of call sites run one after another: medians, quartiles and means add (an approximation for the
    quartiles, as the parts were timed apart); the spread adds in quadrature, as for independent noise."""
    if len(timings) == 1:
        return timings[0]
    return TimingStats(
        median_s=sum(t.median_s for t in timings),
        min_s=sum(t.min_s for t in timings),
        max_s=sum(t.max_s for t in timings),
        q1_s=sum(t.q1_s for t in timings),
        q3_s=sum(t.q3_s for t in timings),
        mean_s=sum(t.mean_s for t in timings),
        stdev_s=math.sqrt(sum(t.stdev_s**2 for t in timings)),
        rounds=sum(t.rounds for t in timings),
        warmup_rounds=sum(t.warmup_rounds for t in timings),
        stable=all(t.stable for t in timings),
        measure_s=sum(t.measure_s for t in timings),
        budget_limited=any(t.budget_limited for t in timings),
        # Per-call samples and faults stay with each part: the parts' calls do not pair up.
    )


def timing_notes(timing: TimingStats) -> list[str]:
    """What the reader of a verdict must know about how its time was taken."""
    notes = []
    if timing.budget_limited:
        notes.append(f"{timing.rounds} timed calls of {timing.median_s:.3g} s (the minimum): the budget was spent; "
                     "raise --roofline-max-time for more")
    if timing.faults_per_call > 0:
        notes.append(f"{timing.faults_per_call:.0f} page faults per timed call: the time includes first touch of "
                     "fresh memory")
    return notes


def counter_notes(counter: Counter) -> list[str]:
    """Blind spots a counter reported: ops it ran but could not count FLOPs for, when they moved data."""
    uncounted: dict[str, int] = dict(getattr(counter, "uncounted_bytes", None) or {})
    errors: dict[str, str] = dict(getattr(counter, "errors", None) or {})
    notes = [f"could not count {op}: {error}" for op, error in errors.items()]
    if uncounted:
        names = ", ".join(sorted(uncounted, key=lambda op: -uncounted[op])[:5])
        notes.append(f"no FLOP rule for {names}: their FLOPs are missing (bytes are counted)")
    return notes


def _label_of(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__)


class Recorder:
    """Measures the regions of one test.

    When ``enabled`` is false, :meth:`measure` only calls the function once and returns its result, so a
    suite still checks correctness without paying for measurement.
    """

    def __init__(
        self,
        *,
        enabled: bool,
        machine: Callable[[], Machine],
        counter: Callable[[], Counter],
        policy: TimingPolicy = DEFAULT_POLICY,
    ) -> None:
        self.enabled = enabled
        self._machine = machine
        self._counter = counter
        self.policy = policy
        self.regions: list[Region] = []
        self.pending: list[PendingRegion] = []
        self.cores: Any = None  # cores.Planner: measure on cores of its own (None: wherever the OS runs it)
        self.machine_for_cores: Callable[[int], Machine] | None = None  # roofs for that many cores
        self.contended: list[tuple[int, Counter, Callable[..., Any], tuple[Any, ...], dict[str, Any],
                                   Setup | None]] = []

    def measure(self, fn: Callable[..., Any], /, *args: Any, setup: Setup | None = None, **kwargs: Any) -> Any:
        """Count and time ``fn(*args, **kwargs)``; return the result of its counted call.

        ``setup``, if given, runs before every call (the counted one too), untimed and uncounted: it resets
        state that ``fn`` changes in place, or returns fresh ``(args, kwargs)`` for the call.
        """
        if not self.enabled:
            call_args, call_kwargs = prepared_arguments(setup, args, kwargs)
            return fn(*call_args, **call_kwargs)
        return self._measure(self._counter(), _label_of(fn), fn, args, kwargs, setup)

    def declare(
        self,
        flops: float | Mapping[str, float] | None = None,
        bytes: float | Mapping[str, float] | None = None,
        *,
        precision: str = "fp32",
        level: str = "DRAM",
        name: str | None = None,
    ) -> DeclaredRegion:
        """Declare the work of code no counter can see; ``.measure(fn, *args)`` then times it."""
        from pytest_roofline.counters.declared import DeclaredCounter

        counter = DeclaredCounter.from_user(flops, bytes, precision=precision, level=level,
                                            name=name or "declared")
        return DeclaredRegion(self, counter, name)

    def _measure(
        self, counter: Counter, label: str, fn: Callable[..., Any], args: tuple[Any, ...],
        kwargs: Mapping[str, Any], setup: Setup | None = None,
    ) -> Any:
        result, kernels = counter.count(fn, *prepared_arguments(setup, args, kwargs))
        with self.cores.scope() if self.cores is not None else nullcontext() as placed:
            timing = time_callable(fn, args, kwargs, policy=self.policy, synchronize=synchronizer(), setup=setup)
        if getattr(counter, "deferred", False):
            self.pending.append(PendingRegion(label, timing, (fn, args, dict(kwargs))))
        else:
            self._judge(counter, label, kernels, timing, placed)
            if placed is not None and placed.contended:  # measured again at the end of the session
                self.contended.append((len(self.regions) - 1, counter, fn, args, dict(kwargs), setup))
        return result

    def _judge(self, counter: Counter, label: str, kernels: list[KernelSample], timing: TimingStats,
               placement: Any = None) -> None:
        machine = self._machine_for(placement)
        notes = counter_notes(counter) + timing_notes(timing)
        footprint = getattr(counter, "footprint_bytes", None)  # counters that assume no cache reuse
        if footprint:
            kernels, placed = place_working_set(kernels, footprint, machine,
                                                write_allocate=getattr(counter, "write_allocate_bytes", None))
            notes.extend([placed] if placed else [])
        verdict = evaluate_region(kernels, machine, timing.median_s)
        notes.extend(note for note in [above_one_note(verdict, machine)] if note)
        uncounted = dict(getattr(counter, "uncounted_bytes", None) or {})
        self.regions.append(Region(label, counter.name, kernels, timing, verdict, notes, placement=placement,
                                   uncounted=uncounted))

    def settle_pending(self, counter_name: str, kernels: Sequence[KernelSample], notes: Sequence[str] = ()) -> Region:
        """Judge every pending region as one: ``kernels`` (from all of them) against the sum of their times.

        A profiler that scopes its kernels to all measured call sites at once (ncu's NVTX filter) cannot tell
        which call site ran which kernel, so the pending regions become one region; their timings stay in
        ``parts``.
        """
        if not self.pending:
            raise ValueError("no pending region to settle")
        parts = [(p.label, p.timing) for p in self.pending]
        timing = sum_timings([t for _, t in parts])
        label = parts[0][0] if len(parts) == 1 else " + ".join(label for label, _ in parts)
        verdict = evaluate_region(kernels, self._machine(), timing.median_s)
        notes = [*notes, *(note for _, part in parts for note in timing_notes(part))]
        region = Region(label, counter_name, list(kernels), timing, verdict, notes,
                        parts if len(parts) > 1 else [])
        self.regions.append(region)
        self.pending.clear()
        return region

    def count_pending(self, counter: Counter) -> None:
        """Count the pending regions with ``counter`` after all (one more call each) and judge them."""
        for pending in self.pending:
            if pending.call is None:
                raise ValueError(f"pending region {pending.label!r} was released and cannot be counted")
            fn, args, kwargs = pending.call
            _, kernels = counter.count(fn, args, kwargs)
            self._judge(counter, pending.label, kernels, pending.timing)
        self.pending.clear()

    def release_pending(self) -> None:
        """Forget the pending calls (their arguments may hold device memory); their timings stay."""
        for pending in self.pending:
            pending.call = None

    def _machine_for(self, placed: Any) -> Machine:
        if placed is None or self.machine_for_cores is None:
            return self._machine()
        return self.machine_for_cores(placed.count)

    def remeasure_contended(self) -> None:
        """Time the regions that were measured without a free core once more (cores chosen anew) and judge
        them again; those still contended stay marked so."""
        redo, self.contended = self.contended, []
        for index, counter, fn, args, kwargs, setup in redo:
            old = self.regions[index]
            with self.cores.scope() if self.cores is not None else nullcontext() as placed:
                timing = time_callable(fn, args, kwargs, policy=self.policy, synchronize=synchronizer(),
                                       setup=setup)
            verdict = evaluate_region(old.kernels, self._machine_for(placed), timing.median_s)
            notes = [*old.notes, f"contended at first (load {_load_text(old.placement)}); measured again at the "
                     "end of the session" + (", still contended" if placed is not None and placed.contended else "")]
            self.regions[index] = Region(old.label, old.counter, old.kernels, timing, verdict, notes, old.parts,
                                         placed)
            if placed is not None and placed.contended:
                self.contended.append((index, counter, fn, args, kwargs, setup))

    def is_contended(self) -> bool:
        """Whether any region's last measurement had no free core."""
        return any(r.placement is not None and r.placement.contended for r in self.regions)

    def verdict(self) -> Verdict | None:
        """The combined verdict of every region measured so far (None if nothing was measured)."""
        return combine(r.verdict for r in self.regions) if self.regions else None


def _load_text(placement: Any) -> str:
    load = getattr(placement, "load_on", None)
    return "unknown" if load is None else f"{load:.0%}"


@dataclass(frozen=True)
class DeclaredRegion:
    """Returned by :meth:`Recorder.declare`."""

    recorder: Recorder
    counter: Counter
    name: str | None

    def measure(self, fn: Callable[..., Any], /, *args: Any, setup: Setup | None = None, **kwargs: Any) -> Any:
        if not self.recorder.enabled:
            call_args, call_kwargs = prepared_arguments(setup, args, kwargs)
            return fn(*call_args, **call_kwargs)
        return self.recorder._measure(self.counter, self.name or _label_of(fn), fn, args, kwargs, setup)

