"""A turn on a GPU (docs/ab-compare.md, "CUDA"): each call of the turn between two CUDA events on this process's
current stream, queued behind a spin kernel, the host synchronized once at the end of the turn, before the other
side's turn starts.

Each side of a process pair is its own process, so it owns its CUDA context and streams; the events time only
the device work of its own calls (a setup step's device work is queued before the start event), and the host
sync between turns keeps one side's kernels from overlapping the other's.

Why the spin (a *backlog*): a call whose kernels are shorter than the host's time to launch them leaves the
device idle between a start event and its kernel, so the events timed the host's launch path, not the kernel.
On the H100 a 4096-element add read 24 µs a call and a small conv 90 µs, and that host time moved 4-40 %
between processes (false alarms on identical code). A spin kernel queued first keeps the device busy while the
host queues the whole turn; the device then runs the turn's events and kernels back to back, and the events
time the kernels. The spin lasts ``BACKLOG_MARGIN`` times the host's time to queue the previous turn. A call (or
a setup step) that synchronizes the host itself (``.item()``, a copy to the host) drains the backlog: the calls
after it in the turn are timed with their launches, and the spin stops growing after ``MAX_GROWTH`` such turns.
Work a call queues on another stream never was behind the spin, nor between its events.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

if TYPE_CHECKING:
    from pytest_roofline.ab.lockstep import TurnCalls

Runner = Callable[["TurnCalls", int, bool], tuple[float, int]]

BACKLOG_MARGIN = 2.0  # the spin covers twice the host's last time to queue a turn (host jitter, a slow launch)
BACKLOG_FLOOR_S = 20e-6  # and at least this: a first turn, or a host that queued in no time
BACKLOG_CAP_S = 0.02  # a turn never waits longer than this on its spin
MAX_GROWTH = 2  # turns in a row that may grow the spin after it drained; then its size stays (a call that syncs)
FIRST_GUESS_S = 50e-6  # host time to queue one call before any turn was seen (a torch op: 5-30 µs)
CALIBRATION_CYCLES = 20_000_000  # ~10 ms at 2 GHz: the spin's launch is noise against it
CUDA_MAX_BATCH = 100  # calls behind one spin: each queues two events and its kernels, and a stream holds about
# a thousand pending launches before the host blocks (and the calls after are timed with their launches)

_RATES: WeakKeyDictionary[ModuleType, dict[int, float]] = WeakKeyDictionary()  # the spin's rate per device, per process


class Backlog:
    """A spin kernel (``torch.cuda._sleep``) queued ahead of a turn, sized on the host's own pace."""

    def __init__(self, cuda: ModuleType) -> None:  # torch.cuda
        self.cuda = cuda
        self.spin: Callable[[int], None] | None = getattr(cuda, "_sleep", None)
        device = getattr(cuda, "current_device", lambda: 0)
        self.device: int = device()
        self.cycles_per_s: float | None = _RATES.get(cuda, {}).get(self.device)
        self.host_per_call = FIRST_GUESS_S  # a call site of its own: its own pace
        self.queued_s = 0.0  # the spin ahead of the turn now being queued
        self.drained = 0  # turns in a row whose host took as long as their spin

    def calibrate(self) -> bool:
        """The spin's rate in cycles per second, timed once per process and device with events; False where
        there is no spin."""
        if self.spin is None:
            return False
        if self.cycles_per_s is None:
            self.spin(CALIBRATION_CYCLES // 20)  # the spin's first launch loads its module
            start, end = self.cuda.Event(enable_timing=True), self.cuda.Event(enable_timing=True)
            start.record()
            self.spin(CALIBRATION_CYCLES)
            end.record()
            self.cuda.synchronize()
            seconds = start.elapsed_time(end) / 1e3
            if seconds <= 0:
                self.spin = None
                return False
            self.cycles_per_s = CALIBRATION_CYCLES / seconds
            _RATES.setdefault(self.cuda, {})[self.device] = self.cycles_per_s
        return True

    def seconds(self, batch: int) -> float:
        return min(BACKLOG_CAP_S, max(BACKLOG_FLOOR_S, BACKLOG_MARGIN * self.host_per_call * batch))

    def queue(self, batch: int) -> None:
        self.queued_s = 0.0
        if self.calibrate() and self.spin is not None and self.cycles_per_s:
            self.queued_s = self.seconds(batch)
            self.spin(round(self.queued_s * self.cycles_per_s))

    def observe(self, host_seconds: float, batch: int) -> None:
        """Learn the host's pace from a turn's queueing time. A host that took as long as the spin may have
        waited on it (a call or setup that synchronizes), so such a time is the pace only for ``MAX_GROWTH``
        turns in a row: the spin grows to cover a slow host, never without bound on a call that syncs."""
        if self.queued_s and host_seconds >= self.queued_s:
            self.drained += 1
            if self.drained > MAX_GROWTH:
                return
        else:
            self.drained = 0
        self.host_per_call = host_seconds / max(1, batch)


def event_runner(cuda: ModuleType | None = None) -> Runner | None:
    """A ``run_batch`` that times with CUDA events, when torch's CUDA is in use in this process; else None."""
    if cuda is None:
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        if cuda is None or not cuda.is_available() or not cuda.is_initialized():
            return None
    backlog = Backlog(cuda)

    def run(calls: TurnCalls, batch: int, rewarm: bool = False) -> tuple[float, int]:
        return run_batch_events(calls, batch, rewarm, cuda, backlog)

    return run


def run_batch_events(calls: TurnCalls, batch: int, rewarm: bool, cuda: ModuleType, backlog: Backlog | None = None,
                     clock: Callable[[], float] = time.perf_counter) -> tuple[float, int]:
    """``batch`` calls of ``calls`` (a ``timing._Calls``), each between two events; seconds per call (device
    time) and host page faults per call. ``rewarm``: one untimed call first, as on the CPU. ``backlog``: a spin
    queued first, so that the events time the kernels rather than the host's launches. At most
    ``CUDA_MAX_BATCH`` calls, whatever ``batch`` asks (the time is per call)."""
    batch = max(1, min(batch, CUDA_MAX_BATCH))
    if rewarm:
        calls.run()
    cuda.synchronize()  # nothing of the other side's turn or of the re-warm is left in flight
    minor0, major0 = calls.faults()
    if backlog is not None:
        backlog.queue(batch)
    queued_from = clock()
    marks = []
    for _ in range(batch):
        args, kwargs = calls.arguments()
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        start.record()
        calls.fn(*args, **kwargs)
        end.record()
        marks.append((start, end))
    if backlog is not None:
        backlog.observe(clock() - queued_from, batch)
    cuda.synchronize()  # the host waits for the turn's last kernel before the other side's turn
    minor1, major1 = calls.faults()
    milliseconds = sum(start.elapsed_time(end) for start, end in marks)
    return milliseconds / 1e3 / batch, (minor1 - minor0 + major1 - major0) // batch
