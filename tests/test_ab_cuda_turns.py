"""A CUDA turn with a fake ``torch.cuda`` (ab/cuda_turns.py): calls between events, the spin kernel sized on
the host's last turn, a call that syncs, and a torch without the spin."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pytest_roofline.ab.cuda_turns import (
    BACKLOG_CAP_S,
    BACKLOG_FLOOR_S,
    CUDA_MAX_BATCH,
    Backlog,
    event_runner,
    run_batch_events,
)


class FakeEvent:
    def __init__(self, clock: list[float], enable_timing: bool = False) -> None:
        assert enable_timing
        self.clock, self.at = clock, math.nan

    def record(self) -> None:
        self.at = self.clock[0]

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.at - self.at) * 1e3  # milliseconds, as torch.cuda.Event


class FakeCuda:
    def __init__(self) -> None:
        self.clock = [0.0]
        self.log: list[str] = []

    def Event(self, enable_timing: bool = False) -> FakeEvent:
        return FakeEvent(self.clock, enable_timing)

    def synchronize(self) -> None:
        self.log.append("sync")


class FakeCalls:
    def __init__(self, cuda: FakeCuda) -> None:
        self.cuda = cuda

    def fn(self, seconds: float) -> None:
        self.cuda.clock[0] += seconds
        self.cuda.log.append("call")

    def arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        self.cuda.clock[0] += 1.0  # setup: outside every event pair
        return (2e-3,), {}

    def run(self) -> tuple[float, int, int]:
        self.cuda.log.append("rewarm")
        return 0.0, 0, 0

    def faults(self) -> tuple[int, int]:
        return 0, 0


def test_a_cuda_turn_times_each_call_between_events_and_syncs_the_host_between_turns() -> None:
    cuda = FakeCuda()
    seconds, faults = run_batch_events(FakeCalls(cuda), 3, True, cuda)
    assert seconds == pytest.approx(2e-3) and faults == 0  # the setup's second per call is not in the time
    assert cuda.log == ["rewarm", "sync", "call", "call", "call", "sync"]


class SpinningCuda(FakeCuda):
    """A fake device whose spin kernel runs at 2 GHz, and a host clock each call's launch advances by 10 µs."""

    RATE = 2e9

    def __init__(self) -> None:
        super().__init__()
        self.host = [0.0]

        self.pending = 0.0  # device seconds queued since the host last waited

    def _sleep(self, cycles: int) -> None:
        self.clock[0] += cycles / self.RATE
        self.pending += cycles / self.RATE
        self.log.append(f"spin {cycles}")

    def synchronize(self) -> None:
        self.pending = 0.0
        super().synchronize()


class LaunchingCalls(FakeCalls):
    """Calls of ``seconds`` on the device whose launch takes the host 10 µs; ``syncs``: each call then waits on
    the host for everything queued (``.item()``)."""

    def __init__(self, cuda: SpinningCuda, seconds: float = 2e-3, syncs: bool = False) -> None:
        super().__init__(cuda)
        self.spinning, self.seconds, self.syncs = cuda, seconds, syncs

    def arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        super().arguments()
        return (self.seconds,), {}

    def fn(self, seconds: float) -> None:
        super().fn(seconds)
        self.spinning.host[0] += 10e-6
        self.spinning.pending += seconds
        if self.syncs:
            self.spinning.host[0] += self.spinning.pending
            self.spinning.pending = 0.0


def test_a_cuda_turn_queues_a_spin_first_sized_on_the_hosts_last_turn() -> None:
    """The backlog: a spin before the first start event, ``BACKLOG_MARGIN`` times the host's time to queue the
    previous turn (50 µs a call before any), in cycles of the rate calibrated with events; the spin is outside
    every event pair, so the time is the calls' alone."""
    cuda = SpinningCuda()
    backlog = Backlog(cuda)
    assert backlog.calibrate() and backlog.cycles_per_s == pytest.approx(SpinningCuda.RATE)
    cuda.log.clear()
    calls = LaunchingCalls(cuda)
    seconds, _ = run_batch_events(calls, 3, False, cuda, backlog, clock=lambda: cuda.host[0])
    assert seconds == pytest.approx(2e-3)
    first_spin = round(2.0 * 50e-6 * 3 * SpinningCuda.RATE)  # 300 µs of cycles
    assert cuda.log == ["sync", f"spin {first_spin}", "call", "call", "call", "sync"]
    assert backlog.host_per_call == pytest.approx(10e-6)
    cuda.log.clear()
    run_batch_events(calls, 3, False, cuda, backlog, clock=lambda: cuda.host[0])
    assert cuda.log[1] == f"spin {round(2.0 * 10e-6 * 3 * SpinningCuda.RATE)}"  # 60 µs: the host's pace, ×2
    backlog.observe(10.0, 1)  # a turn that waited on the host (a sync inside the call): capped
    assert backlog.seconds(1) == BACKLOG_CAP_S
    backlog.observe(0.0, 1)
    assert backlog.seconds(1) == BACKLOG_FLOOR_S


def test_a_call_that_syncs_stops_growing_the_spin_and_a_turn_holds_at_most_the_batch_cap() -> None:
    """A call that waits on the host drains the spin, and the host's time then includes the spin: that time is
    taken as the pace for ``MAX_GROWTH`` turns, then the spin keeps its size (it would double every turn)."""
    cuda = SpinningCuda()
    backlog = Backlog(cuda)
    calls = LaunchingCalls(cuda, seconds=20e-6, syncs=True)
    spins = []
    for _ in range(6):
        run_batch_events(calls, 3, False, cuda, backlog, clock=lambda: cuda.host[0])
        spins.append(backlog.queued_s)
    assert spins[:3] == pytest.approx([300e-6, 780e-6, 1740e-6])  # 2 × (spin + 3 × (20 + 10) µs) / 3 × 3
    assert spins[2:] == pytest.approx([1740e-6] * 4) and spins[-1] < BACKLOG_CAP_S
    held = LaunchingCalls(cuda, seconds=20e-6)  # the next turns queue faster than the spin: the pace again
    run_batch_events(held, 3, False, cuda, backlog, clock=lambda: cuda.host[0])
    assert backlog.drained == 0 and backlog.host_per_call == pytest.approx(10e-6)
    cuda.log.clear()
    seconds, _ = run_batch_events(held, 1000, False, cuda, backlog, clock=lambda: cuda.host[0])
    assert cuda.log.count("call") == CUDA_MAX_BATCH and seconds == pytest.approx(20e-6)


def test_without_a_spin_kernel_a_cuda_turn_is_timed_as_before() -> None:
    cuda = FakeCuda()  # no _sleep: an older torch, or another array library
    run = event_runner(cuda)
    assert run is not None
    seconds, _ = run(FakeCalls(cuda), 2, False)
    assert seconds == pytest.approx(2e-3) and cuda.log == ["sync", "call", "call", "sync"]
    spinning = SpinningCuda()
    run = event_runner(spinning)
    assert run is not None
    run(LaunchingCalls(spinning), 2, False)
    calibration = ["spin", "spin", "sync"]  # once per process, at its first turn
    assert [entry.split()[0] for entry in spinning.log] == ["sync", *calibration, "spin", "call", "call", "sync"]
    spinning.log.clear()
    run = event_runner(spinning)  # the next call site
    assert run is not None
    run(LaunchingCalls(spinning), 2, False)
    assert [entry.split()[0] for entry in spinning.log] == ["sync", "spin", "call", "call", "sync"]
