"""The two sides of a comparison take turns at one call site: one call (or one short batch of calls) each, the
order inside each pair random, until the paired ratio's interval is narrow enough or the budget is spent.

This side (:func:`time_pairs`) drives; the twin (:func:`follow`) answers. Each side times its own calls with its
own clock; only whole seconds cross the pipe, outside every timed interval. Warm-up runs on both sides first,
alternating, until neither side's calls fault on fresh pages any more; before each timed turn a side makes one
untimed call, so its timed call starts on its own warm data (:func:`run_batch`).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from pytest_roofline.compare.channel import Channel
from pytest_roofline.compare.paired_stats import PairedRatio, paired_ratio, settled
from pytest_roofline.measure.timing import TimingPolicy, TimingStats, side_stats, summarize  # noqa: F401 (side_stats re-exported)

TARGET_HALF_WIDTH = 0.005  # stop once the interval is about +-0.5 % (log scale)
MIN_PAIRS = 20
MAX_PAIRS = 2000
CHECK_EVERY = 10  # pairs between looks at the interval
BATCH_TARGET_S = 5e-4  # a turn of a microsecond call is a batch of calls lasting about this long
MAX_BATCH = 1000
BUDGET_FACTOR = 4.0  # a comparison may take this many times --roofline-max-time per call site (two sides,
# each making an untimed call before its timed one); one whose interval settles stops sooner


@dataclass
class SideTimes:
    """One side's calls at a call site: per timed turn, seconds per call, and page faults per call."""

    times: list[float] = field(default_factory=list)
    faults: list[int] = field(default_factory=list)
    warmup: int = 0


def run_batch(calls: Any, batch: int, rewarm: bool = False) -> tuple[float, int]:
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


@dataclass
class Pairs:
    this: SideTimes
    ref: SideTimes
    batch: int
    result: PairedRatio
    first: list[str]  # "this" or "ref": which side went first in each pair
    budget_limited: bool
    measure_s: float

    def summary(self) -> dict[str, Any]:
        return {"pairs": self.result.pairs, "batch": self.batch, "ratio": self.result.ratio,
                "ci": None if self.result.ci is None else list(self.result.ci),
                "this_first": self.first.count("this"), "budget_limited": self.budget_limited,
                "measure_s": self.measure_s}


def time_pairs(calls: Any, twin: Callable[[str, int], tuple[float, int]], policy: TimingPolicy, tolerance: float,
               *, seed: int = 0, clock: Callable[[], float] = time.perf_counter) -> Pairs:
    """Warm up both sides, then take turns. ``calls``: this side's ``timing._Calls``; ``twin(op, batch)`` makes
    the twin run one warm-up or timed turn (``op`` "warm" or "call") and returns its seconds per call and faults.
    """
    rng = random.Random(seed)
    start = clock()
    budget = BUDGET_FACTOR * policy.max_time_s
    this, ref = SideTimes(), SideTimes()
    # warm-up, alternating: until both sides ran min_warmup calls and quiet_warmup fault-free ones in a row
    quiet_this = quiet_ref = 0
    last = 0.0
    while this.warmup < policy.max_warmup:
        last, faults = run_batch(calls, 1)
        quiet_this = quiet_this + 1 if faults == 0 else 0
        ref_last, ref_faults = twin("warm", 1)
        quiet_ref = quiet_ref + 1 if ref_faults == 0 else 0
        this.warmup += 1
        ref.warmup += 1
        last = max(last, ref_last)
        if clock() - start + 2 * last > policy.warmup_share * budget:
            break
        if this.warmup >= policy.min_warmup and min(quiet_this, quiet_ref) >= policy.quiet_warmup:
            break
    batch = max(1, min(MAX_BATCH, math.ceil(BATCH_TARGET_S / last))) if last > 0 else 1
    first: list[str] = []
    result = PairedRatio(math.nan, None, 0)
    limited = False
    while len(first) < MAX_PAIRS:
        if len(first) >= MIN_PAIRS and clock() - start + 2 * batch * last > budget:
            limited = True
            break
        order = ("this", "ref") if rng.random() < 0.5 else ("ref", "this")
        for side in order:
            if side == "this":
                seconds, faults = run_batch(calls, batch, rewarm=True)
                this.times.append(seconds)
                this.faults.append(faults)
            else:
                seconds, faults = twin("call", batch)
                ref.times.append(seconds)
                ref.faults.append(faults)
        first.append(order[0])
        last = max(this.times[-1], ref.times[-1])
        if len(first) >= MIN_PAIRS and len(first) % CHECK_EVERY == 0:
            result = paired_ratio(this.times, ref.times)
            if settled(result, tolerance, TARGET_HALF_WIDTH) and clock() - start >= policy.min_time_s:
                break
    result = paired_ratio(this.times, ref.times)
    return Pairs(this, ref, batch, result, first, limited and not settled(result, tolerance, TARGET_HALF_WIDTH),
                 clock() - start)


@contextmanager
def pinned_to(cores: list[int] | None) -> Iterator[None]:
    """The twin runs its calls on the cores this side chose for the call site."""
    if not cores:
        with nullcontext():
            yield
        return
    from pytest_roofline.host.cores import pinned

    with pinned(cores):
        yield


def follow(channel: Channel, calls: Any, site: int, label: str,
           judge: Callable[[TimingStats, dict[str, Any] | None], dict[str, Any]],
           runner: Callable[[Any, int, bool], tuple[float, int]] | None = None) -> bool:
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
            if op in ("warm", "call"):
                seconds, faults = run(calls, int(message.get("batch", 1)), op == "call")
                if op == "call":
                    side.times.append(seconds)
                    side.faults.append(faults)
                else:
                    side.warmup += 1
                channel.send(op="t", s=seconds, faults=faults)
            elif op == "site_end":
                region = judge(side_stats(side, True, time.perf_counter() - start), roofs) if side.times else None
                channel.send(op="site", region=region)
                return True
            else:  # end_test, or anything unexpected: stop comparing this test
                return False
