"""Measuring regions: count the work in one pass, time the callable bare in another, judge it.

Plain Python; the pytest fixture in :mod:`pytest_roofline.plugin` is a thin wrapper around
:class:`Recorder`, and scripts can use it directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_roofline.counters import Counter
from pytest_roofline.devices import synchronizer
from pytest_roofline.model import KernelSample, Machine, Verdict, combine, evaluate_region
from pytest_roofline.placement import place_working_set
from pytest_roofline.timing import DEFAULT_POLICY, TimingPolicy, TimingStats, time_callable


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "counter": self.counter,
            "timing": self.timing.to_dict(),
            **self.verdict.to_dict(),
            "kernels": [k.to_dict() for k in self.kernels],
            "notes": list(self.notes),
        }


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

    def measure(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Count and time ``fn(*args, **kwargs)``; return the result of its counted call."""
        if not self.enabled:
            return fn(*args, **kwargs)
        return self._measure(self._counter(), _label_of(fn), fn, args, kwargs)

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
        kwargs: Mapping[str, Any],
    ) -> Any:
        result, kernels = counter.count(fn, args, kwargs)
        timing = time_callable(fn, args, kwargs, policy=self.policy, synchronize=synchronizer())
        machine = self._machine()
        notes = counter_notes(counter)
        footprint = getattr(counter, "footprint_bytes", None)  # counters that assume no cache reuse
        if footprint:
            kernels, placed = place_working_set(kernels, footprint, machine)
            notes.extend([placed] if placed else [])
        verdict = evaluate_region(kernels, machine, timing.median_s)
        self.regions.append(Region(label, counter.name, kernels, timing, verdict, notes))
        return result

    def verdict(self) -> Verdict | None:
        """The combined verdict of every region measured so far (None if nothing was measured)."""
        return combine(r.verdict for r in self.regions) if self.regions else None


@dataclass(frozen=True)
class DeclaredRegion:
    """Returned by :meth:`Recorder.declare`."""

    recorder: Recorder
    counter: Counter
    name: str | None

    def measure(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        if not self.recorder.enabled:
            return fn(*args, **kwargs)
        return self.recorder._measure(self.counter, self.name or _label_of(fn), fn, args, kwargs)

