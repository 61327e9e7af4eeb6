"""A pool of process pairs for ``--roofline-compare`` (docs/ab-compare.md, "Process pairs"): ``k`` twins of this
checkout and ``k`` twins of REF, started once per session (in parallel) and shared by every call site.

Each twin is started with :meth:`.twin.Twin.start`, the twin entry point, unchanged; this module only drives
several of them. Per test, every pair runs the test; the two processes of a pair run it one after the other up to
each call site (which one first alternates between pairs: the first allocates its inputs first), and while one
pair is timed the others wait on their sockets, so no twin's own code runs beside a timed turn.
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pytest_roofline.ab.channel import Message
from pytest_roofline.ab.pairs import MAX_PROCESS_PAIRS, MIN_PROCESS_PAIRS, Rewarm, SiteResult, always, measure_site
from pytest_roofline.ab.parity import Missing
from pytest_roofline.ab.room import shortfall
from pytest_roofline.ab.twin import TestLink, Twin
from pytest_roofline.ab.worktree import Checkout
from pytest_roofline.errors import ChannelClosed, CompareError, TwinStopped
from pytest_roofline.measure.timing import TimingPolicy
from pytest_roofline.model.roofline import MachineDict
from pytest_roofline.record.region_record import RegionRecord


@dataclass
class SideLink:
    """One twin's part in one test, with at most one message read ahead (its next ``ready`` or ``test_done``,
    read early so that the pair's other process runs its code only after this one reached the call site)."""

    twin: Twin
    link: TestLink
    ahead: Message | None = None
    open: bool = False  # between its "begin" and its "site_end"

    def read_ahead(self) -> None:
        if self.ahead is None and self.link.active:
            self.ahead = self.twin.receive()

    def open_site(self, index: int, cores: Sequence[int] | None, roofs: MachineDict | None) -> bool:
        if not self.link.active:
            return False
        message = self.ahead if self.ahead is not None else self.twin.receive()
        self.ahead = None
        if message["op"] == "test_done":
            self.link.active = False
            self.twin.finished[self.link.nodeid] = message
            return False
        if message["op"] != "ready" or message.get("site") != index:
            self.link.active = False
            return False
        # a dead twin: TwinStopped
        self.twin.send(op="begin", cores=list(cores) if cores else None, roofs=roofs)
        self.open = True
        return True

    def turn(self, op: str, batch: int, rewarm: bool) -> tuple[float, int]:
        return self.link.turn(op, batch, rewarm)

    def close_site(self, region: bool = False) -> RegionRecord | None:
        """End the call site (a site this side never timed ends with no region); ``region``: ask for it."""
        self.open = False
        return self.link.close_site(region)

    def end(self) -> Message | None:
        if self.ahead is not None and self.ahead.get("op") == "test_done":
            self.twin.finished[self.link.nodeid] = self.ahead
        self.ahead = None
        return self.twin.end_test(self.link)


@dataclass
class Pair:
    this: SideLink
    ref: SideLink
    alloc_first: str  # "this" or "ref": whose process runs the test up to each call site first

    def sides(self) -> tuple[SideLink, SideLink]:
        return (self.this, self.ref) if self.alloc_first == "this" else (self.ref, self.this)

    def this_turn(self, op: str, batch: int, rewarm: bool) -> tuple[float, int]:
        return self.this.turn(op, batch, rewarm)

    def ref_turn(self, op: str, batch: int, rewarm: bool) -> tuple[float, int]:
        return self.ref.turn(op, batch, rewarm)


def start_pair(this: Twin, ref: Twin, nodeid: str, alloc_first: str) -> Pair | None:
    """Both twins of a pair start ``nodeid``, one after the other (``alloc_first`` first), each run up to its
    first call site before the other starts; None when one lacks the test or has stopped (the other's test is
    let finish)."""
    order = [("this", this), ("ref", ref)]
    links: dict[str, SideLink] = {}
    try:
        for side, twin in order if alloc_first == "this" else order[::-1]:
            test = twin.begin_test(nodeid)
            if test is None:
                raise ChannelClosed(twin.error or f"the {side} twin did not start {nodeid}")
            links[side] = SideLink(twin, test)
            links[side].read_ahead()
    except (ChannelClosed, TwinStopped):
        for link in links.values():
            end_quietly(link)
        return None
    return Pair(links["this"], links["ref"], alloc_first)


def end_quietly(side: SideLink) -> None:
    try:
        side.end()
    except (ChannelClosed, TwinStopped):
        pass


@dataclass
class PoolLink:
    """The comparing side's view of the pool during one test (through ``site_timer.PairedSites``). The first
    ``MIN_PROCESS_PAIRS`` pairs start the test with it; a further pair joins only at a call site the first ones
    did not decide, running the test up to there (the earlier call sites untimed)."""

    __test__ = False
    nodeid: str
    pool: list[tuple[Twin, Twin]]
    seed: int
    grow: Callable[[], bool] | None = None  # starts one more pair in the pool; False when it cannot
    pairs: list[Pair] = field(default_factory=list)  # the pairs in this test, in the pool's order
    tried: int = 0  # how many of the pool's pairs were asked to start the test
    site: int = 0
    last_look: int = MAX_PROCESS_PAIRS  # the most pairs a call site may take (the pool's size)

    def join(self, index: int) -> Pair | None:
        """The pool's next pair, started on this test and brought up to call site ``index`` (not yet open)."""
        while self.tried < len(self.pool) or (self.grow is not None and self.grow()):
            number = self.tried
            self.tried += 1
            this, ref = self.pool[number]
            pair = start_pair(this, ref, self.nodeid, "this" if (number + self.seed) % 2 == 0 else "ref")
            if pair is None:
                continue
            self.pairs.append(pair)
            for earlier in range(index):  # call sites measured before it joined: passed untimed
                for side in pair.sides():
                    if side.open_site(earlier, None, None):
                        side.close_site()
                    side.read_ahead()
            return pair
        return None

    def measure_site(self, label: str, cores: Sequence[int] | None, roofs: MachineDict | None,
                     policy: TimingPolicy, tolerance: float | None, rewarm: Rewarm = always) -> SiteResult | None:
        """Time this test's next call site over process pairs; None when no pair has it on both sides.
        ``tolerance``: the band's half width (None: auto, :func:`.paired_stats.band_for`).
        ``rewarm``: whether each timed turn starts with an untimed call (:func:`.lockstep.run_batch`), given the
        call's seconds (:func:`.pairs.one_pair`); both sides alike."""
        index = self.site
        self.site += 1
        usable: list[Pair] = []
        offered: list[Pair] = []  # asked to open this call site (once each)

        def opened(pair: Pair) -> bool:
            offered.append(pair)
            sides = [side.open_site(index, cores, roofs) for side in pair.sides()]
            if all(sides):
                usable.append(pair)
                return True
            for side in pair.sides():  # one side has no such call site: the other's ends untimed, then
                if side.open:  # runs on only to its next call site or its test's end, before any turn
                    side.close_site()
                    side.read_ahead()
            return False

        def candidates() -> Iterator[Pair]:
            for pair in list(self.pairs):
                if opened(pair):
                    yield pair
            if self.pairs and not usable:  # no pair has this call site on both sides: a new one would not either
                return
            while (joined := self.join(index)) is not None:
                if opened(joined):
                    yield joined

        measured = measure_site(candidates(), policy, tolerance, self.seed + index, max_pairs=self.last_look,
                                rewarm=rewarm)
        result = measured if measured.pairs else None
        for pair in self.pairs:  # pairs in the test but not needed here are opened too, then closed untimed
            if not any(pair is seen for seen in offered):
                opened(pair)
        regions: dict[int, RegionRecord | None] = {}
        for number, pair in enumerate(usable):  # every twin ends the site only now: none ran beside a turn
            for side in pair.sides():
                # REF's work and region from the first REF twin that has one; no other twin counts
                wanted = side is pair.ref and not any(regions.values())
                region = side.close_site(wanted)
                if side is pair.ref:
                    regions[number] = region
                side.read_ahead()
        if result is not None:
            result.ref_regions = [regions.get(n) for n in range(len(result.pairs))]
        return result


def site_seed(nodeid: str, pool_seed: int) -> int:
    """A test's seed for its pairs' orders: its id's and this session's (the pool's) together."""
    return zlib.crc32(nodeid.encode("utf-8", "surrogatepass")) ^ pool_seed


TwinStarter = Callable[[int], tuple[Twin, Twin]]  # pair number -> its two twins, started in parallel
ROOM_RECHECK_S = 2.0  # reading 24 twins' smaps_rollup walks their page tables: not at every undecided call site


class TwinPool:
    """Pairs of twins (this checkout, REF): ``MIN_PROCESS_PAIRS`` started at once, in parallel, and more, up to
    ``limit``, only when a call site needs them (:meth:`grow`); the interface of :class:`.twin.Twin` that the
    plugin uses (``begin_test``, ``end_test``, ``stop``, ``error``, ``nodeids``)."""

    def __init__(self, pairs: list[tuple[Twin, Twin]], starter: TwinStarter | None = None,
                 limit: int | None = None,
                 room: Callable[[Sequence[int]], str | None] = shortfall, seed: int | None = None) -> None:
        self.pairs = pairs
        # this session's draw: with the test's id, it picks which side of each pair allocates and leads first;
        # from the id alone, a test's first pairs had the same orders in every session, and any order effect
        # stayed that test's bias however many sessions ran
        self.seed = random.SystemRandom().getrandbits(32) if seed is None else seed
        self.nodeids: set[str] = set.intersection(*(set(t.nodeids) for pair in pairs for t in pair))
        self.starter = starter
        self.limit = len(pairs) if limit is None or starter is None else max(limit, len(pairs))
        self.last_look = self.limit  # the claim levels' schedule: fixed now, whatever the pool later fails to start
        self.grow_error: str | None = None  # why a later pair could not start (the pool stopped growing)
        self.room = room  # why the machine has no room for one more pair now (ab.room), given the twins' pids
        self.room_note: str | None = None  # the last time the pool stayed smaller for want of room, and why
        self.refused_until = 0.0  # after a refusal the twins' memory is not weighed again for a while

    def grow(self) -> bool:
        """Start one more pair, in parallel with nothing timed (every other twin waits on its socket)."""
        if self.starter is None or len(self.pairs) >= self.limit or self.error is not None:
            return False
        if time.monotonic() < self.refused_until:
            return False
        try:  # only twins still running: an ended one's pid may be another process's by now
            short = self.room([twin.process.pid for twin in self.twins if twin.process.poll() is None])
        except Exception:  # noqa: BLE001 - a guard that cannot look never costs a call site its comparison
            short = None
        if short is not None:  # not now: a later test, holding less, may still grow the pool
            self.room_note = f"a call site stayed at {len(self.pairs)} pairs: {short}"
            self.refused_until = time.monotonic() + ROOM_RECHECK_S
            return False
        try:
            pair = self.starter(len(self.pairs))
        except CompareError as exc:
            self.grow_error = str(exc)
            self.limit = len(self.pairs)
            return False
        self.pairs.append(pair)
        return True

    @property
    def error(self) -> str | None:
        return next((t.error for pair in self.pairs for t in pair if t.error is not None), None)

    @property
    def twins(self) -> list[Twin]:
        return [t for pair in self.pairs for t in pair]

    @classmethod
    def start(cls, this: Checkout, ref: Checkout, pytest_args: Sequence[str],
              roofline_args: Callable[[str], list[str]], folder: Path, python: str | None = None,
              count: int = MAX_PROCESS_PAIRS) -> TwinPool:
        """Start ``min(count, MIN_PROCESS_PAIRS)`` pairs now, the rest up to ``count`` when needed;
        ``roofline_args(name)``: a twin's own roofline arguments (its own folder). A twin that cannot start
        now stops them all, with that twin's error."""

        def start(job: tuple[str, Checkout, str | None]) -> Twin:
            name, checkout, py = job
            return Twin.start(checkout, pytest_args, roofline_args(name), folder / f"twin-{name}.log", python=py)

        def start_pairs(numbers: Sequence[int]) -> list[tuple[Twin, Twin]]:
            jobs = [(f"{side}-{n}", checkout, py) for n in numbers
                    for side, checkout, py in (("this", this, None), ("ref", ref, python))]
            started: list[Twin] = []
            failure: CompareError | None = None
            with ThreadPoolExecutor(max_workers=len(jobs)) as executor:
                for future in [executor.submit(start, job) for job in jobs]:
                    try:
                        started.append(future.result())
                    except CompareError as exc:
                        failure = failure or exc
                    except OSError as exc:  # its log could not be opened: stop the others all the same
                        failure = failure or CompareError(f"--roofline-compare: cannot start a twin: {exc}")
            if failure is not None:
                for twin in started:
                    twin.stop()
                raise failure
            return [(started[2 * n], started[2 * n + 1]) for n in range(len(numbers))]

        first = start_pairs(range(min(count, MIN_PROCESS_PAIRS)))
        return cls(first, starter=lambda number: start_pairs([number])[0], limit=count)

    def begin_test(self, nodeid: str, site: int = 0) -> PoolLink | None:
        """Every pair starts ``nodeid``: its two processes one after the other, each run up to call site
        ``site`` (the earlier ones untimed: this side timed them alone, unchanged at REF) before the next starts;
        None when a twin lacks the test or has stopped."""
        if self.error is not None or nodeid not in self.nodeids:
            return None
        link = PoolLink(nodeid, self.pairs, site_seed(nodeid, self.seed), grow=self.grow, site=site,
                        last_look=self.last_look)
        while len(link.pairs) < MIN_PROCESS_PAIRS and link.join(site) is not None:
            pass
        if not link.pairs or self.error is not None:
            self.end_test(link)
            return None
        return link

    def missing(self, nodeid: str) -> Missing:
        """Why no pair runs ``nodeid``: a twin stopped (not compared), or REF has no such test (new, with the
        evidence, or an error at REF: not compared), as :meth:`.twin.Twin.missing` says for one twin."""
        if self.error is not None:
            return Missing("error", f"not compared: {self.error}")
        lacking = next((twin for pair in self.pairs for twin in pair[:1] if nodeid not in twin.nodeids), None)
        if lacking is not None:  # this checkout's own twin did not collect it (unstable ids?): never "new"
            return Missing("error", f"not compared: this checkout's twin did not collect {nodeid} "
                                    f"(its log: {lacking.log})")
        ref = next((pair[1] for pair in self.pairs if nodeid not in pair[1].nodeids), None)
        if ref is not None:
            return ref.missing(nodeid)
        return Missing("error", "not compared: no process pair could start the test")

    def end_test(self, link: PoolLink) -> Message | None:
        """Let every twin's test finish; REF's outcome (of the first pair's REF twin)."""
        outcome: Message | None = None
        for number, pair in enumerate(link.pairs):
            for side in pair.sides():
                try:
                    done = side.end()
                except (ChannelClosed, TwinStopped):
                    done = None
                if side is pair.ref and number == 0:
                    outcome = done
        return outcome

    def stop(self) -> None:
        """All twins at once: each tears its session down in parallel with the others."""
        for twin in self.twins:
            twin.ask_to_exit()
        for twin in self.twins:
            twin.wait_exit()
