"""Process pairs, the top level of an A/B comparison (docs/ab-compare.md, "Process pairs").

Each call site is measured in ``k`` independent pairs of processes: a twin of this checkout and a twin of REF,
both fresh pytest processes of the same plugin with the same settings, so both sides are measured by the same
code (:mod:`.lockstep`'s ``follow``). Inside a pair, the two take turns as before (:func:`one_pair`); the pair
gives one Hodges-Lehmann ratio. Over the pairs, the ratio and its interval (:func:`.paired_stats.between_pairs`);
pairs are added, from ``MIN_PROCESS_PAIRS`` on, until that interval is decided or the pool or budget is spent
(:func:`measure_site`). Plain Python: the sides are callables, so the statistics and the stopping rule are tested
with fakes.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from pytest_roofline.ab.lockstep import BATCH_TARGET_S, MAX_BATCH, TARGET_HALF_WIDTH, SideTimes
from pytest_roofline.ab.paired_stats import (
    AUTO_BANDS,
    FIRST_LOOK,
    LAST_LOOK,
    BetweenPairs,
    PairedRatio,
    band_for,
    between_pairs,
    decided,
    paired_ratio,
    settled,
)
from pytest_roofline.measure.timing import TimingPolicy
from pytest_roofline.record.region_record import PairedSite, PairSummary, RegionRecord

# a t-interval from fewer pairs is too wide to decide anything; pairs beyond the third are used only where the
# first three did not decide, up to the pool's size, the last look (paired_stats.LAST_LOOK: why twelve)
MIN_PROCESS_PAIRS = FIRST_LOOK
MAX_PROCESS_PAIRS = LAST_LOOK
MIN_TURNS = 10  # turns inside one pair, whatever its budget, for calls up to FLOOR_S / MIN_TURNS long
# A long call needs fewer turns: the verdict's interval is over process pairs (Student's t over their ratios), which
# holds whatever each pair's own spread, and a long call's turns spread little (its own jitter averages out inside
# it); ten turns of an 800 ms call, both sides, are 16 s a pair. The floor is the turns whose timed calls span
# FLOOR_S on each side, at least MIN_LONG_TURNS (a Hodges-Lehmann ratio of five still sets one outlying turn aside;
# a pair's own Wilcoxon interval, kept for diagnosis, needs ten and is absent below).
FLOOR_S = 0.5
MIN_LONG_TURNS = 5
MAX_TURNS = 400
PAIR_BUDGET_SHARE = 0.25  # one pair may take this share of --roofline-max-time (warm-up and turns, both sides)
CHECK_EVERY = 5
# A turn pair in which one side took more page faults per call than this and the other did not is set aside: glibc's
# heap relapses (a freed output a few bytes too small for the next one: allocator.py) and a call then first-touches
# fresh pages, in one process, for several calls in a row or every other call. Which process relapses follows its
# allocation history, not its code: twins of one checkout relapsed together (a conv's A/A pairs 1.64-1.85),
# and beside a busy neighbour the twin that allocated first faulted in 6 of 10 turns through the pair while its
# warm-up was cut at two calls (A/A pairs 0.91-0.94).
FAULTS_NOISE = 16  # a few pages a call: a small block's first touch, no relapse
MAX_SET_ASIDE = MIN_TURNS  # past this many set aside in one pair, faults are the call's own: every turn counts

# (op "warm", "discard" or "call", batch, rewarm) -> (seconds per call, faults); a twin keeps only its "call"
# turns; ``rewarm``: one untimed call before the timed batch (a "warm" turn has none)
Turn = Callable[[str, int, bool], tuple[float, int]]
# a call's seconds -> whether an untimed call before each timed one changes what it measures (measure.probes)
Rewarm = Callable[[float], bool]


def always(_call_s: float) -> bool:
    return True


@dataclass
class PairTimes:
    """One process pair at one call site: both sides' timed turns and the pair's own ratio."""

    this: SideTimes
    ref: SideTimes
    batch: int
    within: PairedRatio  # the pair's Hodges-Lehmann ratio with its Wilcoxon interval (diagnosis only)
    first: list[str]  # which side took the first turn of each turn pair (the lead, in each)
    warm_first: str  # which side warmed up first
    alloc_first: str  # which side's process ran the test up to this call site first (allocated first)
    budget_limited: bool
    measure_s: float
    rewarm: bool = True  # each timed batch began with an untimed call
    kept: list[bool] | None = None  # per turn pair, whether it counts (None: every one); see FAULTS_NOISE
    calm: bool = True  # both sides' warm-ups ended in calls without a relapse's faults

    def counted(self, side: str) -> list[float]:
        """That side's seconds per call in the turn pairs that count."""
        times: list[float] = getattr(self, side).times
        return times if self.kept is None else [t for t, k in zip(times, self.kept, strict=True) if k]

    def summary(self) -> PairSummary:
        return {"ratio": self.within.ratio, "ci": None if self.within.ci is None else list(self.within.ci),
                "turns": self.within.pairs, "batch": self.batch, "this_first": self.first.count("this"),
                "warm_first": self.warm_first, "alloc_first": self.alloc_first,
                "budget_limited": self.budget_limited, "measure_s": self.measure_s, "rewarm": self.rewarm,
                "set_aside": 0 if self.kept is None else self.kept.count(False), "calm_warmup": self.calm,
                "warmup": {"this": self.this.warmup, "ref": self.ref.warmup},
                "faulting_turns": {side: sum(f > FAULTS_NOISE for f in getattr(self, side).faults)
                                   for side in ("this", "ref")}}


def other_side(side: str) -> str:
    return "ref" if side == "this" else "this"


def one_pair(this: Turn, ref: Turn, policy: TimingPolicy, budget_s: float, lead: str, *,
             alloc_first: str = "this", rewarm: Rewarm = always,
             clock: Callable[[], float] = time.perf_counter) -> PairTimes:
    """Warm both sides up, alternating (``lead`` first), until neither faults; one discarded turn pair, timed by
    no one; then turn pairs, ``lead`` first in each, until the pair's own interval is settled, ``budget_s`` is
    spent (after ``MIN_TURNS``) or ``MAX_TURNS``. Both sides are driven the same way: neither is this process.

    Why this order: a call that follows the other side's call reads slower
    than one that follows its own side's (a GEMM's or conv's by 1.3-2.3 % on the CPU VM), so with the order drawn
    (or alternated: lead, other | other, lead) about half the calls followed their own side and every turn's
    ratio carried that difference one way or the other; with the lead first in every turn pair, every timed call
    follows the other side's, as the warm-up's do. The first timed call after the warm-up read slower still
    (the lead's GEMM by about 6 % in the median): the discarded turn pair takes it. Which side leads alternates
    from pair to pair (:func:`measure_site`). ``rewarm``: given the call's seconds in the discarded turn pair
    (the faster side's: a call warm and steady), whether each timed batch starts with an untimed call, on both
    sides alike; it sets what a turn pair costs (a long call's refill is a sliver of it, and its untimed call
    would halve the turns a budget buys).

    A side still page-faulting in earnest (more than ``FAULTS_NOISE`` per call in one of its last
    ``quiet_warmup`` calls) keeps warming up past the warm-up's share of the budget, up to the whole of it. A turn
    pair in which one side faulted in earnest and the other did not is set aside: it neither counts towards
    ``MIN_TURNS`` nor enters the ratio or the pooled times (:attr:`PairTimes.kept`), up to ``MAX_SET_ASIDE`` of
    them; past that the faults are the call's own, and every turn pair counts. Faults on both sides at once are
    the call's own too."""
    if lead not in ("this", "ref"):
        raise ValueError(f"one_pair() needs lead 'this' or 'ref', got {lead!r}")
    start = clock()
    sides = {"this": this, "ref": ref}
    times = {"this": SideTimes(), "ref": SideTimes()}
    warm_order = (lead, other_side(lead))
    quiet = {"this": 0, "ref": 0}
    calm = {"this": 0, "ref": 0}  # calls in a row without a relapse's faults
    settled = False  # both sides calm for quiet_warmup calls in a row
    last = 0.0
    while times["this"].warmup < policy.max_warmup:
        for side in warm_order:
            seconds, faults = sides[side]("warm", 1, False)
            quiet[side] = quiet[side] + 1 if faults == 0 else 0
            calm[side] = calm[side] + 1 if faults <= FAULTS_NOISE else 0
            times[side].warmup += 1
            last = max(last, seconds) if side != warm_order[0] else seconds
        settled = min(calm.values()) >= policy.quiet_warmup  # a relapse may go on a dozen calls: wait it out
        if clock() - start + 2 * last > (policy.warmup_share if settled else 1.0) * budget_s:
            break
        if times["this"].warmup >= policy.min_warmup and min(quiet.values()) >= policy.quiet_warmup:
            break
    batch = max(1, min(MAX_BATCH, math.ceil(BATCH_TARGET_S / last))) if last > 0 else 1
    # the discarded turn pair: run as a turn without the untimed call, kept by no one (nor by the twins' records)
    discarded = min(sides[side]("discard", batch, False)[0] for side in warm_order)
    rewarming = rewarm(discarded)
    floor = turn_floor(discarded * batch)
    relapses = True  # False once more turn pairs were set aside than a relapse accounts for
    first: list[str] = []
    kept: list[bool] = []
    pair = PairTimes(times["this"], times["ref"], batch, PairedRatio(math.nan, None, 0), first, warm_order[0],
                     alloc_first, False, 0.0, rewarming, kept, settled)
    while len(first) < MAX_TURNS:
        counted = kept.count(True)
        # a turn pair costs each side its timed batch and, with the re-warm, one untimed call before it
        if counted >= floor and clock() - start + (2 * batch + (2 if rewarming else 0)) * last > budget_s:
            pair.budget_limited = True
            break
        for side in warm_order:
            seconds, faults = sides[side]("call", batch, rewarming)
            times[side].times.append(seconds)
            times[side].faults.append(faults)
        first.append(lead)
        faulted = [times[side].faults[-1] > FAULTS_NOISE for side in ("this", "ref")]
        kept.append(not relapses or faulted[0] == faulted[1])  # one side alone: that process relapsed
        if kept.count(False) > MAX_SET_ASIDE:  # the call faults as a rule, not a relapse: every turn counts
            relapses = False
            kept[:] = [True] * len(kept)
        last = max(times["this"].times[-1], times["ref"].times[-1])
        counted = kept.count(True)
        if kept[-1] and counted >= MIN_TURNS and counted % CHECK_EVERY == 0:
            pair.within = paired_ratio(pair.counted("this"), pair.counted("ref"))
            if pair.within.half_width <= TARGET_HALF_WIDTH:  # beyond this the between-pair spread dominates
                break
    pair.within = paired_ratio(pair.counted("this"), pair.counted("ref"))
    pair.measure_s = clock() - start
    return pair


def turn_floor(turn_s: float) -> int:
    """The turns a pair takes at least, whatever its budget, for a turn (one side's timed batch) of ``turn_s``:
    :data:`MIN_TURNS` up to a tenth of :data:`FLOOR_S`, then as many as span :data:`FLOOR_S`, at least
    :data:`MIN_LONG_TURNS`."""
    if not turn_s > 0:
        return MIN_TURNS
    return max(MIN_LONG_TURNS, min(MIN_TURNS, math.ceil(FLOOR_S / turn_s)))


@dataclass
class SiteResult:
    """A call site measured over process pairs: the pairs, the top-level ratio, and each side's turns pooled."""

    pairs: list[PairTimes]
    top: BetweenPairs
    budget_limited: bool  # the pool or the budget ran out before the top-level interval was decided
    measure_s: float
    ref_regions: list[RegionRecord | None] = field(default_factory=list)
    band: float = AUTO_BANDS[1]  # the band's half width the site was judged with (auto where no number was given)
    settled: bool = False  # auto: "unchanged" settled on the wide band (paired_stats.settled), judged on it
    last_look: int = MAX_PROCESS_PAIRS  # the most pairs it could take: its claim levels' schedule

    def pooled(self, side: str) -> SideTimes:
        """That side's turns that count (:attr:`PairTimes.kept`), pair after pair."""
        pooled = SideTimes()
        for pair in self.pairs:
            times: SideTimes = getattr(pair, side)
            kept = pair.kept if pair.kept is not None else [True] * len(times.times)
            pooled.times.extend(t for t, k in zip(times.times, kept, strict=True) if k)
            pooled.faults.extend(f for f, k in zip(times.faults, kept, strict=True) if k)
            pooled.warmup += times.warmup
        return pooled

    def ref_region(self) -> RegionRecord | None:
        """REF's region as its twins judged it, with the time and fraction of all REF turns of the pairs."""
        found = next((r for r in self.ref_regions if r), None)
        if found is None:
            return None
        ref = found.copy()
        ref_time = statistics.median(self.pooled("ref").times)
        ref["time_s"] = ref_time
        t_min = float(ref.get("t_min_s") or 0.0)
        ref["fraction"] = t_min / ref_time if ref_time > 0 else 0.0
        ref.pop("timing", None)
        return ref

    def summary(self) -> PairedSite:
        """The region's ``compare`` record: the top level first, then each pair for diagnosis."""
        this_time = statistics.median(self.pooled("this").times)
        ref_time = statistics.median(self.pooled("ref").times)
        return {"ratio": self.top.ratio, "ci": None if self.top.ci is None else list(self.top.ci),
                "claim_ci": None if self.top.claim_ci is None else list(self.top.claim_ci),
                "claim_level": self.top.claim_level, "last_look": self.last_look,
                "equivalence_ci": None if self.top.equivalence_ci is None else list(self.top.equivalence_ci),
                "interval": f"{self.top.interval} over process pairs", "process_pairs": self.top.pairs,
                "pair_ratios": list(self.top.ratios), "between_cv": self.top.cv,
                "pairs": sum(p.within.pairs for p in self.pairs), "batch": max(p.batch for p in self.pairs),
                "this_time_s": this_time, "ref_time_s": ref_time, "budget_limited": self.budget_limited,
                "measure_s": self.measure_s, "max_slowdown": self.band, "settled": self.settled,
                "within": [p.summary() for p in self.pairs]}


class PairSides(Protocol):
    """One process pair as :func:`measure_site` drives it."""

    alloc_first: str

    def this_turn(self, op: str, batch: int, rewarm: bool) -> tuple[float, int]: ...

    def ref_turn(self, op: str, batch: int, rewarm: bool) -> tuple[float, int]: ...


def measure_site(pairs: Iterable[PairSides], policy: TimingPolicy, tolerance: float | None, seed: int, *,
                 min_pairs: int = MIN_PROCESS_PAIRS, max_pairs: int = MAX_PROCESS_PAIRS, rewarm: Rewarm = always,
                 clock: Callable[[], float] = time.perf_counter) -> SiteResult:
    """Time one call site in process pairs, one pair after another: at least ``min_pairs`` (or all there are),
    then more until :func:`.paired_stats.decided` or ``pairs`` is spent (a pair is taken from it only when
    needed), at most ``max_pairs``: the last look, where the claim interval is at its last level
    (:func:`.paired_stats.claim_confidence`). Each pair has its own share of the budget (``PAIR_BUDGET_SHARE`` of
    ``--roofline-max-time``). ``tolerance``: the band's half width; None: the auto band of the pairs so far
    (:func:`.paired_stats.band_for`), at each look and at the end."""
    # which side leads a pair (warms up first, goes first in each turn pair) alternates from pair to pair, the
    # first drawn: what leading does to a side cancels over the pairs, and is not one test's bias every session
    lead = "this" if random.Random(seed).random() < 0.5 else "ref"
    start = clock()
    done: list[PairTimes] = []
    top = between_pairs([])
    candidates = iter(pairs)  # may start a pair only when it is asked for (ab.pool)
    wide = AUTO_BANDS[1] if tolerance is None else None  # auto: "unchanged" may settle on the wide band
    while not (len(done) >= min_pairs and decided(top, band_for(tolerance, top), min_pairs, wide)):
        pair = next(candidates, None) if len(done) < max_pairs else None
        if pair is None:
            break
        done.append(one_pair(pair.this_turn, pair.ref_turn, policy, PAIR_BUDGET_SHARE * policy.max_time_s,
                             lead if len(done) % 2 == 0 else other_side(lead), alloc_first=pair.alloc_first,
                             rewarm=rewarm, clock=clock))
        top = between_pairs([p.within.ratio for p in done], robust=False, last=max_pairs)
    # the robust intervals (signed-rank, trimmed mean) are tried once, on the pairs there are at the end, never as
    # a stopping rule: each try is one more chance of a false claim
    band = band_for(tolerance, top)
    # settled on the wide band, not inside the narrow one: judged on the wide band (paired_stats.settled)
    on_wide = not decided(top, band, min(min_pairs, len(done))) and settled(top, band, wide)
    band = wide if on_wide and wide is not None else band
    top = between_pairs([p.within.ratio for p in done], tolerance=band, last=max_pairs)
    return SiteResult(done, top, not decided(top, band, min(min_pairs, len(done)), wide), clock() - start,
                      band=band, settled=on_wide, last_look=max_pairs)
