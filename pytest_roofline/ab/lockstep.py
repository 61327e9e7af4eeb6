"""The two sides of a comparison take turns at one call site: one call (or one short batch of calls) each, the
pair's lead first in each turn pair, until the paired ratio's interval is narrow enough or the budget is spent.

A process pair's driver (:func:`.pairs.measure_site`) drives; each twin (:func:`follow`) answers. Each side times
its own calls with its own clock; only whole seconds cross the pipe, outside every timed interval. Warm-up runs on
both sides first, alternating, until neither side's calls fault on fresh pages any more, then one discarded turn
pair that neither side keeps (the first call after the warm-up reads slower); before each timed turn a side makes one
untimed call, so its timed call starts on its own warm data (:func:`run_batch`), except where that warms nothing
that matters (the driver says so in each turn: ``measure.probes.rewarm_pays``, judged on the call's time in the
discarded turn pair), where the untimed call would only halve the turns a budget buys.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Protocol

from pytest_roofline.ab.channel import Channel
from pytest_roofline.host.cores import pinned
from pytest_roofline.measure.timing import TimingStats, side_stats
from pytest_roofline.model.roofline import MachineDict
from pytest_roofline.record.region_record import RegionRecord

TARGET_HALF_WIDTH = 0.005  # stop once the interval is about +-0.5 % (log scale)
BATCH_TARGET_S = 5e-4  # a turn of a microsecond call is a batch of calls lasting about this long
MAX_BATCH = 1000


@dataclass
class SideTimes:
    """One side's calls at a call site: per timed turn, seconds per call, and page faults per call."""

    times: list[float] = field(default_factory=list)
    faults: list[int] = field(default_factory=list)
    warmup: int = 0


class TurnCalls(Protocol):
    """What a turn uses of the single timed calls of a call site (``measure.timing.calls_for``)."""

    @property
    def fn(self) -> Callable[..., object]: ...

    def run(self) -> tuple[float, int, int]: ...  # seconds, minor and major page faults of one call

    def arguments(self) -> tuple[tuple[object, ...], Mapping[str, object]]: ...  # after the untimed setup

    def faults(self) -> tuple[int, int]: ...


def run_batch(calls: TurnCalls, batch: int, rewarm: bool = False) -> tuple[float, int]:
    """``batch`` calls back to back (each with its setup, untimed); seconds per call and faults per call.
    ``rewarm``: one untimed call first. The other side's turn has just run through the caches; without it the
    timed call would start on whatever of its data survived that, which depends on where each process's pages
    sit in the shared cache, not on the code: back to back, as in a plain session, each side times its own
    call on its own warm data."""
    if rewarm:
        calls.run()
    total, faults = 0.0, 0
    for _ in range(batch):
        elapsed, minor, major = calls.run()
        total += elapsed
        faults += minor + major
    return total / batch, faults // batch


@contextmanager
def pinned_to(cores: list[int] | None) -> Iterator[None]:
    """The twin runs its calls on the cores this side chose for the call site."""
    if not cores:
        with nullcontext():
            yield
        return

    with pinned(cores):
        yield


def follow(channel: Channel, calls: TurnCalls, site: int, label: str,
           judge: Callable[[TimingStats, MachineDict | None], RegionRecord],
           runner: Callable[[TurnCalls, int, bool], tuple[float, int]] | None = None) -> bool:
    """The twin at one call site: say it is ready, then answer turns until this side ends the site (True) or
    the test (False: later call sites of this test are not compared). ``judge`` makes the twin's region record
    from its timed turns (its own fraction, time and work). ``runner``: how a turn runs (default
    :func:`run_batch`; on a GPU, :func:`.cuda_turns.event_runner`'s)."""
    run = runner or run_batch
    channel.send(op="ready", site=site, label=label)
    side = SideTimes()
    start = time.perf_counter()
    message = channel.receive()
    if message["op"] != "begin":
        return False
    roofs = message.get("roofs")
    with pinned_to(message.get("cores")):
        while True:
            message = channel.receive()
            op = message["op"]
            if op in ("warm", "discard", "call"):  # "discard": a turn the driver keeps no time of, nor does the twin
                rewarm = op != "warm" and bool(message.get("rewarm", True))
                seconds, faults = run(calls, int(message.get("batch", 1)), rewarm)
                if op == "call":
                    side.times.append(seconds)
                    side.faults.append(faults)
                elif op == "warm":
                    side.warmup += 1
                channel.send(op="t", s=seconds, faults=faults)
            elif op == "site_end":
                wanted = side.times and message.get("count", True)
                region = judge(side_stats(side, True, time.perf_counter() - start), roofs) if wanted else None
                channel.send(op="site", region=region)
                return True
            else:  # end_test, or anything unexpected: stop comparing this test
                return False
