"""Process pairs and their turns (ab/pairs.py): the auto band and the stopping rule on fake pairs, the symmetric
order of turns, the discarded turn pair, a relapse into page faults set aside, the untimed call and the turn
floor. No timing: the sides are fakes that return set times."""


from __future__ import annotations

import math
import zlib
from itertools import pairwise
from typing import Any

import pytest
from ab_fakes import FakePair, site

from pytest_roofline.ab.paired_stats import (
    AUTO_BANDS,
    auto_band,
    band_for,
    between_pairs,
    decided,
)
from pytest_roofline.ab.pairs import MAX_SET_ASIDE, MIN_TURNS, SiteResult, measure_site, one_pair
from pytest_roofline.ab.verdict import time_verdict, verdict
from pytest_roofline.measure.timing import TimingPolicy


def test_the_auto_band_is_2_percent_where_the_pairs_agree_within_2_5_percent() -> None:
    assert AUTO_BANDS == (0.02, 0.03)
    assert auto_band(0.0) == auto_band(0.025) == 0.02 and auto_band(0.0251) == auto_band(math.nan) == 0.03
    # three pairs 1.00, 1.025, 1.05: log ratios 0, 0.02469, 0.04879, sd 0.02440 by hand: the 2 % band
    steady = between_pairs([1.0, 1.025, 1.05], robust=False)
    assert steady.cv == pytest.approx(0.02440, abs=1e-5) and band_for(None, steady) == 0.02
    spread = between_pairs([1.0, 1.025, 1.052], robust=False)  # 0, 0.02469, 0.05069: sd 0.02535
    assert spread.cv == pytest.approx(0.02535, abs=1e-5) and band_for(None, spread) == 0.03
    assert band_for(0.05, steady) == 0.05 and band_for(None, between_pairs([1.01])) == 0.03  # one pair: no sd


def test_the_auto_band_fails_a_steady_2_5_percent_that_the_3_percent_band_calls_unchanged() -> None:
    steady = [1.025, 1.026, 1.024, 1.025, 1.025, 1.026]
    fixed, _ = site(steady, tolerance=0.03)
    # the first three: log sd 0.00098; inside the 3 % band, their 95 % interval (below four pairs the one
    # "unchanged" needs) 1.025 x exp(+-4.303 x 0.00098 / sqrt(3)) = [1.0225, 1.0275] lies inside: unchanged
    assert fixed.top.pairs == 3 and fixed.band == 0.03 and fixed.summary()["max_slowdown"] == 0.03
    assert verdict(fixed.top.as_paired(), fixed.band) == "unchanged"
    auto, _ = site(steady, tolerance=None)
    # at four pairs the claim interval's low end (99.99 %), 1.025 x exp(-27.031 x 0.00080 / 2) = 1.0140, is short
    # of 1.02; five pairs (sd 0.00069) put it at 1.025 x exp(-15.134 x 0.00069 / sqrt(5)) = 1.0202: slower, on
    # the 2 % band
    assert auto.top.pairs == 5 and auto.band == 0.02 and auto.summary()["max_slowdown"] == 0.02
    assert auto.top.claim_ci is not None and auto.top.claim_ci[0] > 1.02 and not auto.budget_limited
    assert verdict(auto.top.as_paired(), auto.band) == "slower"
    spread, _ = site([1.05, 1.0, 1.03, 0.99, 1.06, 1.02], tolerance=None)  # sd 2.7 %: the 3 % band
    assert spread.band == 0.03


def test_under_auto_a_ratio_near_one_settles_inside_the_wide_band() -> None:
    # five pairs 1.00, 1.03, 0.98, 1.02, 0.975: log mean 0.00077, sd 0.02404 (the 2 % band under auto); the 90 %
    # interval exp(0.00077 +- 2.132 x 0.02404 / sqrt(5)) = [0.9781, 1.0240] reaches past 1.02: not unchanged on 2 %
    spread = between_pairs([1.0, 1.03, 0.98, 1.02, 0.975], robust=False)
    assert spread.cv == pytest.approx(0.02404, abs=1e-5)
    assert spread.equivalence_ci == pytest.approx((0.9781, 1.0240), abs=1e-4)
    assert not decided(spread, 0.02, 3)
    # the ratio 1.0008 lies within a third of the band (1.02 ** (1/3) = 1.0066) of 1 and the interval inside the
    # wide band [1/1.03, 1.03]: settled, under auto
    assert decided(spread, 0.02, 3, wide=0.03)
    assert decided(spread, 0.03, 3, wide=0.03) and decided(spread, 0.03, 3)  # on the wide band: the usual rule
    # the same spread about 1.01: past a third of the band from 1, and more pairs could yet claim it
    shifted = between_pairs([r * 1.01 for r in (1.0, 1.03, 0.98, 1.02, 0.975)], robust=False)
    assert not decided(shifted, 0.02, 3, wide=0.03)
    # three pairs have no 90 % interval: never settled
    assert not decided(between_pairs([1.0, 1.001, 0.999], robust=False), 0.0001, 3, wide=0.03)
    # the site: at four pairs the ratio is 1.0073 (past 1.0066), at five it settles; it is judged on the wide
    # band, inside which its 90 % interval lies: steady (on the 2 % band its interval would say inconclusive)
    result, _ = site([1.0, 1.03, 0.98, 1.02, 0.975, 1.0, 1.0], tolerance=None)
    assert result.top.pairs == 5 and result.settled and not result.budget_limited
    assert result.band == 0.03 and result.summary()["max_slowdown"] == 0.03 and result.summary()["settled"] is True
    assert time_verdict(result.top.as_paired(), result.band) == "same"
    assert time_verdict(result.top.as_paired(), 0.02) == "inconclusive"
    steady, _ = site([1.0, 1.001, 0.999, 1.0], tolerance=None)  # inside the narrow band: not settled
    assert steady.band == 0.02 and not steady.settled
    # a number fixes the band and settles nothing: the sixth pair brings the 90 % interval inside +-2 %
    # ([0.9831, 1.0185])
    fixed, _ = site([1.0, 1.03, 0.98, 1.02, 0.975, 1.0, 1.0], tolerance=0.02)
    assert fixed.top.pairs == 6 and fixed.top.equivalence_ci == pytest.approx((0.9831, 1.0185), abs=1e-4)


def test_agreeing_pairs_stop_at_three_and_disagreeing_ones_use_the_pool() -> None:
    result, pairs = site([1.0, 1.0, 1.0, 1.0, 1.0])
    assert result.top.pairs == 3 and not result.budget_limited  # decided: a point interval at 1
    assert result.top.ratio == pytest.approx(1.0) and pairs[3].turns == [] and pairs[4].turns == []
    # a constant ratio inside a pair settles its own interval at the first look (10 turns)
    assert [p.within.pairs for p in result.pairs] == [10, 10, 10]
    result, _ = site([0.95, 1.05, 1.0, 1.04, 0.97])
    assert result.top.pairs == 5 and result.budget_limited  # the pool is spent, still undecided: inconclusive
    assert result.top.ratios == pytest.approx((0.95, 1.05, 1.0, 1.04, 0.97))
    summary = result.summary()
    assert summary["process_pairs"] == 5 and summary["pair_ratios"] == pytest.approx([0.95, 1.05, 1.0, 1.04, 0.97])
    assert summary["between_cv"] == pytest.approx(result.top.cv) and len(summary["within"]) == 5
    # a 20 % slowdown, pairs 1 % apart: claimed beyond the band at 99.99 % from the fourth pair (three pairs' claim
    # interval spans +-55 % in the log)
    result, _ = site([1.2, 1.21, 1.19, 1.2, 1.0, 1.0])
    assert result.top.pairs == 4 and result.top.claim_ci is not None and result.top.claim_ci[0] > 1.03


def test_the_lead_goes_first_in_every_turn_pair_after_one_discarded_pair() -> None:
    for lead, other in (("this", "ref"), ("ref", "this")):
        clock = [0.0]
        pair = FakePair(0.01, 0.01, clock)

        def now(clock: list[float] = clock) -> float:
            return clock[0]

        times = one_pair(pair.this_turn, pair.ref_turn, TimingPolicy(max_time_s=1.0), 1.0, lead, clock=now)
        assert times.warm_first == lead and len(times.first) >= MIN_TURNS
        assert times.first == [lead] * len(times.first)
        # every timed call follows the other side's: lead other lead other ... (the discarded pair is not a "call")
        assert pair.turns == [lead, other] * len(times.first)
        assert len(times.this.times) == len(times.ref.times) == len(times.first)
    with pytest.raises(ValueError, match="lead 'this' or 'ref'"):
        one_pair(pair.this_turn, pair.ref_turn, TimingPolicy(max_time_s=1.0), 1.0, "REF")


@pytest.mark.parametrize("lead", ["this", "ref"])
def test_the_discarded_turn_pair_is_not_in_the_ratio(lead: str) -> None:
    class SlowFirstCall(FakePair):  # the lead's first call after the warm-up 20 % slow, as a GEMM's read
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.settled: list[str] = []

        def _turn(self, side: str, seconds: float, op: str, batch: int, rewarm: bool = False) -> tuple[float, int]:
            if op == "discard":
                self.settled.append(side)
                return seconds * 1.2 if side == lead else seconds, 0
            return super()._turn(side, seconds, op, batch, rewarm)

    clock = [0.0]
    pair = SlowFirstCall(0.01, 0.01, clock)
    times = one_pair(pair.this_turn, pair.ref_turn, TimingPolicy(max_time_s=1.0), 1.0, lead,
                     clock=lambda: clock[0])
    assert pair.settled == [lead, "ref" if lead == "this" else "this"]  # one discarded turn pair, lead first
    assert max(times.this.times + times.ref.times) == pytest.approx(0.01)  # its slow call is in no side's times


class Relapse(FakePair):
    """This side's timed calls ``relapse`` (turn indexes) take 1.8 times as long with 800 page faults each (a
    freed output too small for the next: fresh pages), as glibc's heap did under a conv on the CPU VM; its
    warm-up faults only in its first ``warm_faults`` calls."""

    def __init__(self, relapse: range, warm_faults: int = 1) -> None:
        super().__init__(0.01, 0.01, [0.0])
        self.relapse, self.warm_faults, self.calls, self.warms = relapse, warm_faults, 0, 0

    def this_turn(self, op: str, batch: int, rewarm: bool = True) -> tuple[float, int]:
        if op == "warm":
            self.warms += 1
            return self._turn("this", 0.01, op, batch, rewarm)[0], 800 if self.warms <= self.warm_faults else 0
        if op != "call":
            return self._turn("this", 0.01, op, batch, rewarm)
        self.calls += 1
        if self.calls - 1 in self.relapse:
            return self._turn("this", 0.018, op, batch, rewarm)[0], 800
        return self._turn("this", 0.01, op, batch, rewarm)


def pair_of(fake: Relapse) -> Any:
    return one_pair(fake.this_turn, fake.ref_turn, TimingPolicy(max_time_s=1.0), 1.0, "this",
                    clock=lambda: fake.clock[0])


def test_a_relapse_into_page_faults_on_one_side_is_set_aside() -> None:
    # turns 2-8 relapse: set aside, and ten fault-free turn pairs still counted; the ratio is theirs, 1.0
    times = pair_of(Relapse(range(2, 9)))
    assert times.kept is not None and times.kept.count(False) == 7 and times.kept.count(True) >= MIN_TURNS
    assert times.within.ratio == pytest.approx(1.0) and times.within.pairs == times.kept.count(True)
    assert times.summary()["set_aside"] == 7 and len(times.this.times) == len(times.kept)  # the record keeps all
    result = SiteResult([times], between_pairs([times.within.ratio]), False, 0.0)
    assert result.pooled("this").times == pytest.approx([0.01] * times.kept.count(True))
    assert max(result.pooled("this").faults) == 0
    # a side still faulting when the warm-up's share (half the budget: 24 turn pairs of 20 ms) is spent warms up
    # on, to three calm calls after its 30 faulting ones, and its relapse is set aside all the same
    times = pair_of(Relapse(range(2, 9), warm_faults=30))
    assert times.this.warmup == 33 and times.calm and times.summary()["warmup"] == {"this": 33, "ref": 33}
    assert times.kept.count(False) == 7 and times.within.ratio == pytest.approx(1.0)
    # one that faults through the whole budget's warm-up: its relapse is set aside too (the first process to
    # allocate faulted in 6 of 10 turns on the Xeon VM while its warm-up was cut at two calls)
    times = pair_of(Relapse(range(2, 9), warm_faults=500))
    assert not times.calm and times.this.warmup < 50 and times.kept.count(False) == 7
    assert times.within.ratio == pytest.approx(1.0) and times.summary()["faulting_turns"] == {"this": 7, "ref": 0}
    # faults on both sides at once are the call's own: those turn pairs count
    both = Relapse(range(2, 9))
    ref_turn = both.ref_turn
    both.ref_turn = lambda op, batch, rewarm: (  # type: ignore[method-assign]
        ref_turn(op, batch, rewarm)[0], 800 if op == "call" and both.calls - 1 in both.relapse else 0)
    times = pair_of(both)
    assert times.kept == [True] * len(times.first) and times.within.ratio > 1.3
    # faults in more than MAX_SET_ASIDE turn pairs are no relapse: every turn pair counts again
    times = pair_of(Relapse(range(400)))
    assert times.kept == [True] * len(times.first) and times.within.ratio == pytest.approx(1.8)
    assert times.within.pairs == len(times.first) > MAX_SET_ASIDE


def test_the_pairs_of_a_call_site_take_the_lead_in_turn_and_the_first_lead_is_drawn() -> None:
    clock = [0.0]
    leads = {}
    for seed in range(40):
        pairs = [FakePair(0.01 * r, 0.01, clock) for r in (0.95, 1.05, 1.0, 1.04, 0.97)]
        result = measure_site(pairs, TimingPolicy(max_time_s=1.0), 0.03, seed=seed, clock=lambda: clock[0])
        warm = [p.warm_first for p in result.pairs]
        assert len(warm) == 5 and all(a != b for a, b in pairwise(warm))  # this, ref, this, ... or the mirror
        leads[seed] = warm[0]
    assert set(leads.values()) == {"this", "ref"}  # which side leads the first pair is drawn per seed
    # the same seed, the same orders (a pool draws its seed once per session: ab/pool.py)
    again = measure_site([FakePair(0.01, 0.01, clock) for _ in range(3)], TimingPolicy(max_time_s=1.0), 0.03,
                         seed=7, clock=lambda: clock[0])
    assert again.pairs[0].warm_first == leads[7]


def test_a_pool_draws_its_own_seed_so_a_test_is_not_ordered_alike_every_session() -> None:
    from pytest_roofline.ab.pool import TwinPool, site_seed

    class Named:
        nodeids = ("t.py::a",)

    seeds = {TwinPool([(Named(), Named())]).seed for _ in range(8)}  # type: ignore[list-item]
    assert len(seeds) > 1
    assert TwinPool([(Named(), Named())], seed=5).seed == 5  # type: ignore[list-item]
    # a test's seed is its id's and the session's together: the same test, another session, other orders
    assert site_seed("t.py::a", 5) == zlib.crc32(b"t.py::a") ^ 5
    assert site_seed("t.py::a", 5) != site_seed("t.py::a", 6)


class Spread(FakePair):
    """REF's calls vary (1.0, 1.1, 0.9, 1.05, 0.95 times): the pair's own interval never settles."""

    spread = (1.0, 1.1, 0.9, 1.05, 0.95)
    calls = 0

    def _turn(self, side: str, seconds: float, op: str, batch: int, rewarm: bool = False) -> tuple[float, int]:
        self.clock[0] += seconds * (batch + (1 if rewarm else 0))
        if op == "call":
            self.turns.append(f"{side}{'+' if rewarm else ''}")
        if side == "ref" and op == "call":
            self.calls += 1
            return seconds * self.spread[self.calls % 5], 0
        return seconds, 0


def test_without_the_untimed_call_a_budget_buys_about_twice_the_turns() -> None:
    turns = {}
    for rewarm in (True, False):
        clock = [0.0]
        pair = Spread(0.01, 0.01, clock)

        def now(clock: list[float] = clock) -> float:
            return clock[0]

        times = one_pair(pair.this_turn, pair.ref_turn, TimingPolicy(max_time_s=1.0), 1.0, "this",
                         rewarm=lambda call_s, rewarm=rewarm: rewarm, clock=now)
        assert times.budget_limited and times.rewarm is rewarm and times.summary()["rewarm"] is rewarm
        assert set(pair.turns) == ({"this+", "ref+"} if rewarm else {"this", "ref"})  # both sides alike
        turns[rewarm] = len(times.first)
        # it stops when one more turn pair would overrun the budget: 40 ms with the untimed calls, 20 without
        pair_s = 0.04 if rewarm else 0.02
        assert 1.0 - pair_s < times.measure_s <= 1.0
    # 10 ms calls, 1 s: a turn pair is 40 ms with the untimed calls, 20 ms without, after the same warm-up
    assert turns[True] >= MIN_TURNS and 1.8 < turns[False] / turns[True] < 2.2


def test_the_untimed_call_is_judged_on_the_calls_time_in_the_discarded_turn_pair() -> None:
    asked: list[float] = []

    def rewarm(call_s: float) -> bool:
        asked.append(call_s)
        return call_s < 0.02

    for this_s, expected in ((0.01, True), (0.03, False)):
        asked.clear()
        clock = [0.0]
        pair = Spread(this_s, 0.04, clock)  # the faster side's call in the discarded turn pair is the one judged
        times = one_pair(pair.this_turn, pair.ref_turn, TimingPolicy(max_time_s=1.0), 4.0, "this",
                         rewarm=rewarm, clock=lambda clock=clock: clock[0])
        assert asked == [this_s] and times.rewarm is expected


def test_a_working_set_is_past_the_last_cache_at_twice_its_size() -> None:
    from pytest_roofline.measure.probes import past_the_last_cache
    from pytest_roofline.model import Machine

    cpu = Machine("cpu", {"fp32": 1e12}, {"DRAM": 1e11}, info={"capacities": {"L2": 2**20, "L3": 32 * 2**20}})
    assert past_the_last_cache(64 * 2**20, cpu)  # a 32 MiB L3: 64 MiB and up
    assert not past_the_last_cache(64 * 2**20 - 1, cpu)
    assert not past_the_last_cache(None, cpu)
    gpu = Machine("gpu", {"bf16": 1e15}, {"HBM": 3e12}, info={"fingerprint": {"l2_bytes": 50 * 2**20}})
    assert past_the_last_cache(100 * 2**20, gpu) and not past_the_last_cache(99 * 2**20, gpu)
    assert not past_the_last_cache(2**40, Machine("x", {"fp32": 1.0}, {"DRAM": 1.0}))  # no size known



def test_the_untimed_call_is_kept_where_refilling_the_caches_could_cost_a_percent_of_the_call() -> None:
    from pytest_roofline.measure.probes import rewarm_pays
    from pytest_roofline.model import Machine

    mib = 2**20
    cpu = Machine("cpu", {"fp32": 1e11}, {"L2": 2e11, "L3": 1e11, "DRAM": 2e10},
                  info={"capacities": {"L2": mib, "L3": 32 * mib}})
    # a 9.4 MB GEMM bound at 7.9 ms: twice it fits the 32 MiB L3; refilling the 1 MiB L2 from it takes
    # 1 MiB / 100 GB/s = 10.5 us, under 1 % of 7.9 ms (79 us): no untimed call
    assert not rewarm_pays(9.4e6, 7.9e-3, cpu)
    assert rewarm_pays(9.4e6, 0.5e-3, cpu)  # bound at 0.5 ms: 1 % is 5 us, under the 10.5 us refill
    # twice 20 MiB does not fit the L3: the other side evicts it, and it comes back from DRAM in 1.05 ms
    assert rewarm_pays(20 * mib, 0.1, cpu)  # more than 1 % of a 100 ms call
    assert not rewarm_pays(20 * mib, 0.2, cpu)  # under 1 % of a 200 ms one
    assert rewarm_pays(20 * mib, 1.0, Machine("cpu", {"fp32": 1e11}, {"L2": 2e11, "L3": 1e11}, info=cpu.info))
    assert not rewarm_pays(64 * mib, 1e-6, cpu)  # past the last cache: nothing stays
    assert rewarm_pays(48 * 2**10, 1e-6, cpu)  # a 48 KiB add: its refill is half its bound
    assert rewarm_pays(None, 1.0, cpu) and rewarm_pays(9.4e6, 0.0, cpu)  # unknown size or bound
    no_l3_bandwidth = Machine("cpu", {"fp32": 1e11}, {"DRAM": 2e10}, info=cpu.info)
    assert rewarm_pays(9.4e6, 7.9e-3, no_l3_bandwidth)


def test_a_long_calls_pair_takes_the_turns_that_span_half_a_second() -> None:
    from pytest_roofline.ab.pairs import FLOOR_S, MIN_LONG_TURNS, turn_floor

    assert (FLOOR_S, MIN_LONG_TURNS) == (0.5, 5)
    # ten turns up to 50 ms a turn; then ceil(0.5 s / turn); at least five
    assert [turn_floor(s) for s in (0.0, 0.01, 0.05, 0.06, 0.1, 0.8)] == [MIN_TURNS, MIN_TURNS, MIN_TURNS, 9, 5, 5]
    for seconds, turns in ((0.01, MIN_TURNS), (0.2, 5)):
        clock = [0.0]
        pair = Spread(seconds, seconds, clock)  # REF's calls vary: the pair's own interval never settles
        # a budget far too small: the pair stops at its floor, after warm-up and the discarded turn pair
        times = one_pair(pair.this_turn, pair.ref_turn, TimingPolicy(max_time_s=1.0), 0.01, "this",
                         rewarm=lambda call_s: False, clock=lambda clock=clock: clock[0])
        assert times.budget_limited and times.within.pairs == len(times.first) == turns
        assert (times.within.ci is None) is (turns < MIN_TURNS)  # no Wilcoxon interval below ten turns
