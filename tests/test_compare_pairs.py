"""Process pairs, the top level of the A/B comparison (ab/pairs.py, paired_stats.between_pairs, report.py):
the t-interval over per-pair ratios by hand, the stopping rule, the symmetric order, the verdict table, and a
CUDA turn with a fake ``torch.cuda``. No timing: the sides are fakes that return set times."""

from __future__ import annotations

import json
import math
import statistics
import zlib
from itertools import pairwise
from pathlib import Path
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
from pytest_roofline.ab.paired_stats import (
    AUTO_BANDS,
    CLAIM_ERROR,
    INTERIM_ERROR,
    LAST_ERROR,
    ROBUST_ERROR,
    PairedRatio,
    auto_band,
    band_for,
    between_pairs,
    claim_confidence,
    decided,
    far_pair,
    level_text,
    over_process_pairs,
    signed_rank_critical,
    t95,
    t975,
    t_two_sided,
    yuen_interval,
)
from pytest_roofline.ab.pairs import MAX_SET_ASIDE, MIN_TURNS, SiteResult, measure_site, one_pair
from pytest_roofline.ab.verdict import compare_regions, process_record, time_verdict, verdict
from pytest_roofline.ab.verdict_text import failure_message, inside_band_move, process_effects, said_move, summary_lines
from pytest_roofline.gates.comparison import Tolerances
from pytest_roofline.history.baseline import _measured
from pytest_roofline.measure.timing import TimingPolicy
from pytest_roofline.output.ab_record import ABRecord
from pytest_roofline.output.record import TestRecord

ab = ABRecord.from_dict  # a block as results.json holds it


def test_the_t_interval_over_three_pairs_by_hand() -> None:
    # log ratios 0.01, 0.03, 0.02: mean 0.02, sample sd 0.01, half width t(0.975, 2) * 0.01 / sqrt(3)
    # = 4.303 * 0.005774 = 0.024842
    result = between_pairs([math.exp(0.01), math.exp(0.03), math.exp(0.02)])
    assert result.ratio == pytest.approx(math.exp(0.02))
    assert result.cv == pytest.approx(0.01)
    assert result.ci is not None
    assert math.log(result.ci[0]) == pytest.approx(0.02 - 0.024842, abs=1e-6)
    assert math.log(result.ci[1]) == pytest.approx(0.02 + 0.024842, abs=1e-6)
    assert result.pairs == 3 and result.as_paired().pairs == 3
    assert t975(2) == pytest.approx(4.303, abs=1e-3) and t975(4) == pytest.approx(2.776, abs=1e-3)
    assert t975(100) == pytest.approx(1.96, abs=1e-3)
    assert between_pairs([1.1]).ci is None  # one pair: no spread, no interval


def test_a_change_is_claimed_at_the_looks_level_and_unchanged_said_at_95() -> None:
    # the claim's 1 % is spent over the looks (Haybittle-Peto): the nine looks before the twelfth pair share
    # 0.1 %, each at 1 - 0.001 / 9 (99.99 %), the twelfth at 1 - 0.007 (99.3 %); quantiles by scipy.stats.t.ppf
    assert claim_confidence(3) == claim_confidence(11) == pytest.approx(1 - 0.001 / 9)
    assert claim_confidence(12) == claim_confidence(20) == pytest.approx(0.993)
    assert claim_confidence(5, last=5) == pytest.approx(0.993) and claim_confidence(3, last=5) == 1 - 0.001 / 2
    assert INTERIM_ERROR + 2 * ROBUST_ERROR + LAST_ERROR == pytest.approx(CLAIM_ERROR) == 0.01
    assert t_two_sided(1 - 0.001 / 9, 2) == pytest.approx(94.860, abs=1e-3)
    assert t_two_sided(1 - 0.001 / 9, 4) == pytest.approx(15.134, abs=1e-3)
    assert t_two_sided(0.993, 11) == pytest.approx(3.306, abs=1e-3)
    assert (level_text(1 - 0.001 / 9), level_text(0.993), level_text(None)) == ("99.99%", "99.3%", "99%")
    # log ratios 0.01, 0.03, 0.02 again: the claim interval is 94.860 * 0.01 / sqrt(3) = 0.547677 either side
    result = between_pairs([math.exp(0.01), math.exp(0.03), math.exp(0.02)])
    assert result.claim_ci is not None and result.claim_level == pytest.approx(1 - 0.001 / 9)
    assert math.log(result.claim_ci[0]) == pytest.approx(0.02 - 0.547677, abs=1e-6)
    assert math.log(result.claim_ci[1]) == pytest.approx(0.02 + 0.547677, abs=1e-6)
    assert result.as_paired().claim_ci == result.claim_ci
    assert result.as_paired().claim_level == result.claim_level
    # the H100's A/A false alarms (2026-11-27): identical code, 5 process pairs whose 95 % interval excluded 1
    conv = between_pairs([1.183, 1.008, 1.153, 1.072, 1.238])  # 1.128, 95 % [1.019, 1.248], claim [0.649, 1.960]
    add = between_pairs([0.907, 0.824, 0.977, 0.872, 0.888])
    for aa in (conv, add):
        assert aa.ci is not None and not aa.ci[0] < 1 < aa.ci[1]
        assert verdict(aa.as_paired(), 0.03) == "inconclusive"  # was slower / faster at 95 %
        assert not decided(aa, 0.03, 3)  # so more pairs are taken, up to --roofline-compare-pairs
    assert verdict(PairedRatio(1.128, (1.019, 1.248), 5), 0.03) == "slower"  # no claim interval: the 95 % one
    said = compare_regions([region(1.128, [1.183, 1.008, 1.153, 1.072, 1.238])], Tolerances(0.1, 0.03, ("time",)),
                           "REF", "compute:fp32")
    assert said is not None and said.verdict == "inconclusive" and said.failed_on == ()
    assert "inconclusive: the 99.99% interval [0.649, 1.960] reaches 1; process pairs 1.183" in said.explanation
    assert said.time.claim_ci == pytest.approx((0.6491, 1.9596), abs=1e-4)
    assert said.to_dict()["changes"]["time"]["claim_ci"] == pytest.approx([0.6491, 1.9596], abs=1e-4)
    assert said.to_dict()["changes"]["time"]["claim_level"] == pytest.approx(1 - 0.001 / 9)
    # a real 10 % slowdown, pairs within 1 %: three and four pairs claim nothing at 99.99 % ([0.669, 1.810],
    # [0.995, 1.216]); a fifth decides it ([1.052, 1.152])
    pairs = [1.10, 1.11, 1.09, 1.10, 1.105]
    assert [decided(between_pairs(pairs[:k]), 0.03, 3) for k in (3, 4, 5)] == [False, False, True]
    assert verdict(between_pairs(pairs).as_paired(), 0.03) == "slower"


def test_one_pair_far_from_the_others_leaves_the_claim_to_the_signed_rank_interval() -> None:
    # the signed-rank statistic's null law by hand, n = 8: P(W <= 0) = 1/256, two-sided 0.0078 <= 0.01, and
    # P(W <= 1) = 2/256 (0.0156) is not; P(W <= 3) = 5/256 (two-sided 0.039) <= 0.05 < 7/256 (W <= 4, 0.055)
    assert signed_rank_critical(8, 0.01) == 0 and signed_rank_critical(8, 0.05) == 3
    assert signed_rank_critical(7, 0.01) == -1 and signed_rank_critical(10, 0.05) == 8  # 8: the printed tables'
    assert [signed_rank_critical(n, 0.01) for n in (9, 10, 11, 12)] == [1, 3, 5, 7]  # the tables' too
    # at its share of the claim's error (ROBUST_ERROR, 0.1 %): n = 10 has no critical value (2/1024 > 0.001),
    # n = 11 has W <= 0 (2/2048 <= 0.001): all eleven pairs on one side
    assert [signed_rank_critical(n, ROBUST_ERROR) for n in (10, 11, 12)] == [-1, 0, 1]
    # a 5 % planted copy on the CPU VM (2026-11-27, --roofline-max-time 1.0): one pair of 1.207 among seven of
    # 1.02-1.09, and three more pairs, one of them far (1.30): the t-interval at 99.99 % reaches 1 ([0.930,
    # 1.247]); all eleven pairs read slower, so the signed-rank interval at 99.9 % is [smallest pair, largest
    # pair] (W = 0) and excludes 1
    pairs = [1.207, 1.069, 1.018, 1.039, 1.088, 1.056, 1.03, 1.042, 1.01, 1.30, 1.025]
    assert between_pairs(pairs, robust=False).claim_ci == pytest.approx((0.930, 1.247), abs=1e-3)
    robust = between_pairs(pairs)
    assert robust.interval == "signed-rank" and robust.claim_ci == pytest.approx((1.01, 1.30))
    assert robust.claim_level == pytest.approx(1 - ROBUST_ERROR)
    # the Hodges-Lehmann estimate (median of the 66 Walsh averages) and the 95 % interval from the 11th smallest
    # and largest of them (W <= 10)
    assert robust.ratio == pytest.approx(1.0532, abs=1e-4)
    assert robust.ci == pytest.approx((1.0275, 1.1504), abs=1e-4)
    assert verdict(robust.as_paired(), 0.03) == "slower"
    # one pair of exactly 1.0 among ten above: the smallest Walsh average is 0, the signed-rank interval
    # reaches 1 and the t one stays
    assert between_pairs([1.0, *pairs[1:]]).interval == "t"
    # the site tries it once, on its final pairs: stopping went on the t-interval to the pool's 11
    result, _ = site(pairs)
    assert result.top.pairs == 11 and result.top.interval == "signed-rank"
    assert result.summary()["interval"] == "signed-rank over process pairs"
    record = {"max_slowdown": 0.03, "max_drop": 0.1, "ref": "REF", "pairs": 110,
              **process_record([region(robust.ratio, pairs)])}
    assert record["interval"] == "signed-rank over process pairs"
    said = compare_regions([region(robust.ratio, pairs)], Tolerances(0.1, 0.03, ("time",)), "REF", "memory:DRAM")
    assert said is not None and said.verdict == "regressed"
    message = failure_message("t", said, ab(record))
    assert "signed-rank interval over the pairs' Hodges-Lehmann ratios 1.207" in message
    assert "99.9% CI [1.010, 1.300]" in message
    # ten of them: no signed-rank interval exists at 0.1 %, the t one decides (and reaches 1)
    ten = between_pairs(pairs[:10])
    assert ten.interval == "t" and ten.claim_ci is not None and ten.claim_ci[0] < 1
    assert verdict(ten.as_paired(), 0.03) == "inconclusive"
    # identical code with one far pair: its mean is past the band but the pairs do not agree on a side, so the
    # t-interval stays and the comparison stays inconclusive, never slower
    aa = between_pairs([1.40, 1.02, 0.99, 1.01, 1.02, 1.0, 1.01, 1.01, 1.02, 1.01, 1.0])
    assert aa.interval == "t" and aa.ratio > 1.03
    assert verdict(aa.as_paired(), 0.03) == "inconclusive"
    # agreeing pairs: the t-interval decides, whatever the signed-rank one would say
    assert between_pairs([1.05, 1.051, 1.049, 1.05, 1.052, 1.048, 1.05, 1.05, 1.05, 1.051, 1.049]).interval == "t"


def test_a_far_pair_on_the_other_side_of_1_leaves_the_claim_to_the_trimmed_mean() -> None:
    # eleven pairs 3-8 % slower and one 22 % faster (as a 5 % planted copy read on the CPU VM, 2026-11-27: eleven
    # of 1.018-1.136 and one 0.780): the far pair's log ratio is the largest in size, so the signed-rank
    # statistic of the negative side is its rank, 12 > 1 (the critical value at 12 and 0.1 %), and its interval
    # reaches 1
    logs = [0.05, -0.25, 0.04, 0.06, 0.05, 0.03, 0.07, 0.04, 0.06, 0.05, 0.05, 0.08]
    pairs = [math.exp(v) for v in logs]
    plain = between_pairs(pairs, robust=False)
    assert plain.claim_ci is not None and plain.claim_ci[0] < 1 and plain.ratio == pytest.approx(math.exp(0.0275))
    assert between_pairs(pairs, trimmed=False).interval == "t"  # the rule before: inconclusive
    # Yuen by hand: k = 12, g = floor(0.2 k) = 2 cut from each end, h = 8 kept (0.04 0.04 0.05 0.05 0.05 0.05
    # 0.06 0.06), mean 0.05; winsorized (the two lowest set to 0.04, the two highest to 0.06): eight values 0.01
    # from their mean 0.05, s_w^2 = 8e-4 / 11, standard error sqrt(11 s_w^2 / (8 * 7)) = sqrt(8e-4 / 56)
    se = math.sqrt(8e-4 / 56)
    robust = between_pairs(pairs)
    assert robust.interval == "trimmed-mean" and robust.ratio == pytest.approx(math.exp(0.05))
    # the claim interval at 1 - ROBUST_ERROR: t(0.9995, 7) = 5.407883 (scipy.stats.t.ppf)
    assert robust.claim_ci == pytest.approx((math.exp(0.05 - 5.407883 * se), math.exp(0.05 + 5.407883 * se)))
    assert robust.ci == pytest.approx((math.exp(0.05 - 2.364624 * se), math.exp(0.05 + 2.364624 * se)))
    assert robust.claim_ci[0] == pytest.approx(1.0300, abs=1e-4)  # type: ignore[index]
    assert robust.claim_level == pytest.approx(0.999)
    assert robust.ratios == plain.ratios and robust.cv == plain.cv  # the spread reported is the pairs' own
    assert verdict(robust.as_paired(), 0.03) == "slower"
    # the site tries it once, on its final pairs (the t-interval, widened by the far pair, never stopped it)
    result, _ = site(pairs)
    assert result.top.pairs == 12 and result.top.interval == "trimmed-mean"
    record = {"max_slowdown": 0.03, "max_drop": 0.1, "ref": "REF", "pairs": 120,
              **process_record([region(robust.ratio, pairs)])}
    assert record["interval"] == "trimmed-mean over process pairs"
    said = compare_regions([region(robust.ratio, pairs)], Tolerances(0.1, 0.03, ("time",)), "REF", "memory:DRAM")
    assert said is not None and said.verdict == "regressed"
    assert "trimmed-mean interval (Yuen) over the pairs' Hodges-Lehmann ratios 1.051 0.779" in failure_message(
        "t", said, ab(record))
    # no pair far from the others: the same twelve with the far one at 0.00 (3.4 robust sds from the median)
    assert between_pairs([math.exp(v) for v in [*logs[:1], 0.0, *logs[2:]]]).interval != "trimmed-mean"
    # seven pairs: too few to trim (as for the signed-rank interval)
    assert between_pairs(pairs[:7]).interval == "t"


def test_a_robust_estimate_inside_the_band_leaves_unchanged_to_the_t_interval() -> None:
    # eight pairs that stop as unchanged on the t's 90 % interval at the eighth; one (0.978) is far from the rest,
    # and the trimmed mean's 99.9 % interval excludes 1, at 1.023, inside the band: it can claim nothing, so with
    # the band known the t result stays (steady), and without it the trimmed result keeps the t's equivalence
    # interval
    pairs = [1.0247, 0.9779, 1.0262, 1.0221, 1.0254, 1.0214, 1.0237, 1.0234]
    assert [decided(between_pairs(pairs[:k], robust=False), 0.03, 3) for k in range(3, 9)] == [False] * 5 + [True]
    judged = between_pairs(pairs, tolerance=0.03)
    assert judged.interval == "t" and decided(judged, 0.03, 3)
    unbanded = between_pairs(pairs)
    assert unbanded.interval == "trimmed-mean" and unbanded.equivalence_ci == judged.equivalence_ci
    assert decided(unbanded, 0.03, 3)
    result, _ = site(pairs)
    assert result.top.pairs == 8 and result.top.interval == "t" and not result.budget_limited
    said = compare_regions([region(judged.ratio, pairs)], Tolerances(0.1, 0.03, ("time",)), "REF", "memory:DRAM")
    assert said is not None and said.verdict == "steady"
    assert said.time.equivalence_ci == pytest.approx(judged.equivalence_ci)
    assert said.time.to_dict()["equivalence_ci"] == pytest.approx(list(judged.equivalence_ci))  # type: ignore[arg-type]


def test_far_pair_and_yuen_interval_by_hand() -> None:
    # median 0.05, absolute deviations 0 0 0.01 0.01 0.3: MAD 0.01, robust sd 0.014826; 0.3 is 20 of them away
    assert far_pair([0.05, 0.05, 0.04, 0.06, 0.35])
    assert not far_pair([0.05, 0.05, 0.04, 0.06, 0.09])  # 0.04 away: 2.7 robust sds
    assert not far_pair([0.05, 0.05, 0.05, 0.04, 0.35])  # MAD 0: no spread to judge by
    # five values, g = floor(0.2 * 5) = 1, h = 3: kept 0.04 0.05 0.06 (mean 0.05); winsorized 0.04 0.04 0.05
    # 0.06 0.06 (mean 0.05, s_w^2 = 4e-4 / 4); se = sqrt(4 * 1e-4 / (3 * 2)); t on 2 degrees of freedom
    mean, half, claim = yuen_interval([0.01, 0.04, 0.05, 0.06, 0.30])  # type: ignore[misc]
    se = math.sqrt(4 * 1e-4 / 6)
    assert mean == pytest.approx(0.05) and half == pytest.approx(t975(2) * se)
    assert claim == pytest.approx(t_two_sided(1 - ROBUST_ERROR, 2) * se)  # the robust intervals' share
    # four values: nothing cut (g = 0), so Yuen's interval is Student's t: se = sd / sqrt(4) = sqrt(5e-4 / 12)
    mean, half, _ = yuen_interval([0.01, 0.02, 0.03, 0.04])  # type: ignore[misc]
    assert mean == pytest.approx(0.025) and half == pytest.approx(t975(3) * math.sqrt(5e-4 / 12))
    assert yuen_interval([0.01, 0.02]) is None  # fewer than 3 kept


def test_the_stopping_rule_beyond_inside_or_straddling_the_band() -> None:
    tol = 0.03
    inside = between_pairs([1.0, 1.005, 0.995])  # half width 4.303 * 0.005 / sqrt(3) = 1.2 %: inside +-3 %
    assert decided(inside, tol, 3)
    # three pairs 1 % apart claim no 10 % change at 99.99 % (+-55 % in the log); five do (+-4.5 %), and twelve,
    # pairs 4 % apart at the last look, at 99.3 % ([1.045, 1.115] about 1.080), not at the eleventh ([1.011, 1.144])
    assert not decided(between_pairs([1.10, 1.11, 1.09]), tol, 3)
    beyond = between_pairs([1.10, 1.11, 1.09, 1.10, 1.105])
    assert decided(beyond, tol, 3)
    last = between_pairs(twelve(1.08, spread=0.04))
    assert last.claim_level == pytest.approx(0.993) and decided(last, tol, 3)
    assert not decided(between_pairs(twelve(1.08, spread=0.04)[:11]), tol, 3)  # the eleventh look: 99.99 %
    straddle = between_pairs([1.0, 1.06, 1.03])  # 1.03 +- 7 %: neither
    assert not decided(straddle, tol, 3)
    assert not decided(between_pairs([1.0, 1.0]), tol, 3)  # fewer than the minimum pairs


def test_unchanged_needs_the_90_percent_interval_inside_the_band_from_four_pairs() -> None:
    tol, band = 0.03, math.log(1.03)  # the band's half width on the log scale: 0.02956
    # four pairs at log ratios +-0.02: mean 0, sd sqrt(4 * 0.0004 / 3) = 0.023094, sd / sqrt(4) = 0.011547;
    # 90 %: t95(3) = 2.353363 -> +-0.02717, inside; 95 %: t975(3) = 3.182446 -> +-0.03675, past the band
    four = between_pairs([math.exp(v) for v in (0.02, -0.02, 0.02, -0.02)])
    assert t95(3) == pytest.approx(2.353363) and t95(31) == pytest.approx(1.644854, abs=1e-6)
    assert four.equivalence_ci == pytest.approx((math.exp(-2.353363 * 0.011547), math.exp(2.353363 * 0.011547)),
                                                rel=1e-5)
    assert four.ci == pytest.approx((math.exp(-3.182446 * 0.011547), math.exp(3.182446 * 0.011547)), rel=1e-5)
    assert math.log(four.ci[1]) > band > math.log(four.equivalence_ci[1])  # type: ignore[index]
    assert decided(four, tol, 3)
    # three pairs at 0.015, -0.015, 0: sd 0.015; the 90 % interval (+-2.53 %) would lie inside, but below four
    # pairs the 95 % one decides (t975(2) = 4.302653: +-3.73 %)
    three = between_pairs([math.exp(v) for v in (0.015, -0.015, 0.0)])
    assert three.equivalence_ci is None and not decided(three, tol, 3)
    # a site of such pairs stops at the fourth
    result, pairs = site([math.exp(v) for v in (0.02, -0.02, 0.02, -0.02, 0.0, 0.0)])
    assert result.top.pairs == 4 and not result.budget_limited and pairs[4].turns == []
    assert result.summary()["equivalence_ci"] == pytest.approx(list(four.equivalence_ci))  # type: ignore[arg-type]
    # the test's verdict reads the record's equivalence interval: steady; a record without one (written before it)
    # falls back to the 95 % interval: inconclusive, the note naming the interval it read
    ratios = [math.exp(v) for v in (0.02, -0.02, 0.02, -0.02)]
    tolerances = Tolerances(0.1, tol, ("time",))
    steady = compare_regions([region(1.0, ratios)], tolerances, "REF", "memory:DRAM")
    assert steady is not None and steady.time.verdict == "same" and steady.verdict == "steady"
    older = region(1.0, ratios)
    del older["compare"]["equivalence_ci"]
    unsure = compare_regions([older], tolerances, "REF", "memory:DRAM")
    assert unsure is not None and unsure.verdict == "inconclusive"
    assert "the interval [0.964, 1.037] reaches past the ±3% band" in unsure.explanation
    wide = region(1.0, [math.exp(v) for v in (0.03, -0.03, 0.03, -0.03)])  # 90 %: +-4.1 %
    said = compare_regions([wide], tolerances, "REF", "memory:DRAM")
    assert said is not None and "the 90% interval [0.960, 1.042] reaches past the ±3% band" in said.explanation


class FakePair:
    """A process pair whose sides take ``this_s`` and ``ref_s`` per call, on a clock they advance."""

    def __init__(self, this_s: float, ref_s: float, clock: list[float], alloc_first: str = "this") -> None:
        self.this_s, self.ref_s, self.clock, self.alloc_first = this_s, ref_s, clock, alloc_first
        self.turns: list[str] = []

    def _turn(self, side: str, seconds: float, op: str, batch: int, rewarm: bool = False) -> tuple[float, int]:
        self.clock[0] += seconds * (batch + (1 if rewarm else 0))
        if op == "call":
            self.turns.append(side)
        return seconds, 0

    def this_turn(self, op: str, batch: int, rewarm: bool = True) -> tuple[float, int]:
        return self._turn("this", self.this_s, op, batch, rewarm)

    def ref_turn(self, op: str, batch: int, rewarm: bool = True) -> tuple[float, int]:
        return self._turn("ref", self.ref_s, op, batch, rewarm)


def site(ratios: list[float], seconds: float = 0.01, tolerance: float | None = 0.03) -> tuple[Any, list[FakePair]]:
    clock = [0.0]
    pairs = [FakePair(seconds * r, seconds, clock) for r in ratios]
    result = measure_site(pairs, TimingPolicy(max_time_s=1.0), tolerance, seed=1, clock=lambda: clock[0])
    return result, pairs


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


def test_a_twin_keeps_no_time_of_the_discarded_turn() -> None:
    from pytest_roofline.ab.lockstep import follow

    class Calls:
        runs = 0

        def run(self) -> tuple[float, int, int]:
            self.runs += 1
            return 0.001 * self.runs, 0, 0  # each call slower than the last: which ones were kept shows

    judged: list[Any] = []

    def judge(stats: Any, roofs: Any) -> dict[str, Any]:
        judged.append(stats)
        return {}

    channel = ScriptedChannel([{"op": "begin"}, {"op": "warm", "batch": 1},
                               {"op": "discard", "batch": 1, "rewarm": False},
                               {"op": "call", "batch": 1, "rewarm": False},
                               {"op": "call", "batch": 1, "rewarm": False}, {"op": "site_end", "region": True}])
    calls = Calls()
    assert follow(channel, calls, 0, "f", judge)  # type: ignore[arg-type]
    assert calls.runs == 4 and [m["s"] for m in channel.sent if m["op"] == "t"] == [0.001, 0.002, 0.003, 0.004]
    stats = judged[0]
    assert stats.rounds == 2 and stats.warmup_rounds == 1 and stats.min_s == pytest.approx(0.003)


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


def twelve(ratio: float, spread: float = 0.01) -> list[float]:
    """Twelve process pairs (the last look) about ``ratio``: ``ratio`` times 1 - spread, 1, 1 + spread, four
    times over."""
    return [ratio * (1 + d) for d in (-spread, 0.0, spread)] * 4


def region(ratio: float, pair_ratios: list[float], flops: float = 1e8, ref_flops: float = 1e8,
           this_time: float | None = None) -> dict[str, Any]:
    top = between_pairs(pair_ratios)
    ref = {"time_s": 1e-3, "t_min_s": 0.5e-3 * ref_flops / 1e8, "flops_by_precision": {"fp32": ref_flops},
           "bytes": {}}
    return {"label": "step", "time_s": this_time or 1e-3 * ratio, "t_min_s": 0.5e-3 * flops / 1e8,
            "flops_by_precision": {"fp32": flops}, "bytes": {},
            "compare": {"compared": True, "ratio": top.ratio, "ci": list(top.ci or ()),
                        "claim_ci": list(top.claim_ci or ()), "equivalence_ci": list(top.equivalence_ci or ()),
                        "claim_level": top.claim_level, "last_look": 12, "pairs": 30,
                        "pair_ratios": pair_ratios, "between_cv": top.cv, "this_time_s": 1e-3 * ratio,
                        "ref_time_s": 1e-3, "within": [{"ratio": r, "ci": None, "turns": 10} for r in pair_ratios],
                        "ref": ref}}


def test_work_is_not_time_changed_versus_regressed() -> None:
    tolerances = Tolerances(0.1, 0.03, ("time", "fraction"))
    # 8 % more work, the same time (pairs agree within the band): the work changed, the code is not slower
    same_time = compare_regions([region(1.0, [0.995, 1.0, 1.005], flops=1.08e8)], tolerances, "REF", "compute:fp32")
    assert same_time is not None and same_time.verdict == "changed" and same_time.failed_on == ()
    # 8 % more work and 8 % more time, twelve pairs 1 % apart: the claim interval above the band, regressed on time
    slower = compare_regions([region(1.08, twelve(1.08), flops=1.08e8)], tolerances, "REF", "compute:fp32")
    assert slower is not None and slower.verdict == "regressed" and slower.failed_on == ("time",)
    # pairs that disagree (0.98 .. 1.12): the interval reaches 1, so no verdict on time
    noisy = compare_regions([region(1.05, [0.98, 1.12, 1.05])], tolerances, "REF", "compute:fp32")
    assert noisy is not None and noisy.time.verdict == "inconclusive" and noisy.verdict == "inconclusive"
    assert noisy.failed_on == () and "process pairs 0.980 1.120 1.050" in noisy.explanation


def test_a_ratio_inside_the_band_with_an_interval_past_it_is_inconclusive_not_steady() -> None:
    tolerances = Tolerances(0.1, 0.03, ("time", "fraction"))
    # mean of the logs ~1.000; sd ~3 %: t(2) = 4.30 puts the interval at about [0.93, 1.08], past the 3 % band
    wide = compare_regions([region(1.0, [0.97, 1.0, 1.03])], tolerances, "REF", "compute:fp32")
    assert wide is not None and wide.time.verdict == "inconclusive" and wide.verdict == "inconclusive"
    assert wide.time.ci is not None and wide.time.ci[0] < 1 / 1.03 and wide.time.ci[1] > 1.03
    assert "reaches past the ±3% band" in wide.explanation
    assert wide.explanation.endswith("more process pairs (--roofline-compare-pairs) or a longer --roofline-max-time "
                                     "narrow it")
    # the same mean with pairs that agree to 0.5 %: the interval [0.988, 1.012] lies inside the band
    narrow = compare_regions([region(1.0, [0.995, 1.0, 1.005])], tolerances, "REF", "compute:fp32")
    assert narrow is not None and narrow.time.verdict == "same" and narrow.verdict == "steady"


def test_an_inconclusive_note_says_which_level_to_sample_more() -> None:
    """Pairs 3 % apart whose own turns are known to ±0.2 % (se 0.1 %): the spread is the pairs' state, which only
    more pairs sample; the same pairs with turns of ±6 % (se ~3 %, as far apart as the pairs are): the turns
    explain it, and a longer budget per pair narrows it too, if the pairs ran out of budget; pairs whose turns
    reached their own target would not use a longer one."""
    tolerances = Tolerances(0.1, 0.03, ("time", "fraction"))

    def with_turns(half_width: float, limited: bool = True) -> dict[str, Any]:
        record = region(1.0, [0.97, 1.0, 1.03])
        record["compare"]["within"] = [{"ratio": r, "ci": [r / (1 + half_width), r * (1 + half_width)], "turns": 40,
                                        "budget_limited": limited} for r in record["compare"]["pair_ratios"]]
        return record

    def note(record: dict[str, Any]) -> str:
        result = compare_regions([record], tolerances, "REF", "compute:fp32")
        assert result is not None and result.time.verdict == "inconclusive"
        return result.explanation

    assert note(with_turns(0.002)).endswith("the pairs differ by more than their own turns explain: more process "
                                           "pairs (--roofline-compare-pairs) narrow it most, a longer "
                                           "--roofline-max-time hardly")
    # turns of ±1.5 % (se ~0.75 %): the pairs' 3 % spread is 16 times their variance, still the pairs'
    assert "narrow it most" in note(with_turns(0.015))
    # turns of ±3 % (se ~1.5 %): 4 times, at the threshold: either
    assert note(with_turns(0.03)).endswith("more process pairs (--roofline-compare-pairs) or a longer "
                                           "--roofline-max-time narrow it")
    assert note(with_turns(0.06)).endswith("more process pairs (--roofline-compare-pairs) or a longer "
                                           "--roofline-max-time narrow it")
    assert note(with_turns(0.06, limited=False)).endswith(
        "more process pairs (--roofline-compare-pairs) narrow it (each pair's turns reached their own target)")


def test_an_inconclusive_change_the_pairs_place_past_a_third_of_the_band_is_said_slower() -> None:
    """A planted 3 % conv slowdown's twelve pairs (CPU VM, tenth round) against a 3 % band: the 90 % interval
    reaches past 1.03, so neither steady nor failed; its claim interval (the last look's, 99.3 %) lies above 1.01
    (a third of the band),
    so the note says "slower all the same". Identical code's inconclusive pairs (0.97, 1.0, 1.03) are not said."""
    tolerances = Tolerances(0.1, 0.03, ("time", "fraction"))
    pairs = [1.000, 1.035, 1.041, 1.026, 1.024, 1.024, 1.018, 1.023, 1.028, 1.059, 1.034, 1.017]

    def explained(ratios: list[float]) -> str:
        result = compare_regions([region(1.0, ratios)], tolerances, "REF", "compute:fp32")
        assert result is not None and result.time.verdict == "inconclusive" and result.verdict == "inconclusive"
        return result.explanation

    logs = [math.log(r) for r in pairs]
    mean, half = statistics.fmean(logs), 3.306245 * statistics.stdev(logs) / math.sqrt(12)  # t(0.9965, 11)
    low, high = math.exp(mean - half), math.exp(mean + half)
    assert 1.01 < low < 1.03 < high  # by hand: [1.0137, 1.0411]
    assert (f"; slower all the same: the 99.3% interval [{low:.3f}, {high:.3f}] lies above ×1.010; process pairs"
            in explained(pairs))
    faster = explained([1 / r for r in pairs])  # the mirror, on the log scale: below 1 / 1.01
    assert f"; faster all the same: the 99.3% interval [{1 / high:.3f}, {1 / low:.3f}] lies below ×0.990" in faster
    assert "all the same" not in explained([0.97, 1.0, 1.03])
    time = {"ratio": math.exp(mean), "claim_ci": [low, high], "verdict": "inconclusive"}
    record = {"verdict": "inconclusive", "max_slowdown": 0.03, "changes": {"time": time}}
    assert said_move(ab(record)) == "slower" and inside_band_move(ab(record)) is None  # said in the note, not twice
    assert said_move(ab({**record, "verdict": "regressed"})) is None
    # inconclusive on the fraction alone, the time decided: no note on the time, nothing said
    assert said_move(ab({**record, "changes": {"time": {**time, "verdict": "same"}}})) is None


def test_paired_numbers_only_and_call_sites_combined_pair_by_pair() -> None:
    # this side's region time was replaced by a solo re-measure (0.2 ms); the record keeps the pairs' 1.1 ms
    one = region(1.1, [1.1, 1.1, 1.1], this_time=0.2e-3)
    result = compare_regions([one], Tolerances(0.1, 0.03, ("time",)), "REF", None)
    assert result is not None and result.time.now == pytest.approx(1.1e-3)
    # two sites, REF times 3 ms and 1 ms: pair j's log ratio is (3 log a_j + log b_j) / 4
    sites = [(3e-3, [1.0, 1.02, 0.98]), (1e-3, [2.0, 2.0, 2.0])]
    top = over_process_pairs(sites)
    assert top is not None
    assert top.ratios == pytest.approx(tuple(math.exp((3 * math.log(a) + math.log(2.0)) / 4)
                                             for a in (1.0, 1.02, 0.98)))
    assert over_process_pairs([(1e-3, [1.0, 1.0, 1.0]), (1e-3, [1.0, 1.0])]) is None  # unequal pair counts
    record = process_record([one])
    assert record["process_pairs"] == 3 and record["pair_ratios"] == pytest.approx([1.1, 1.1, 1.1])
    assert record["sites"][0]["within"][0]["turns"] == 10


def test_one_line_says_when_process_pairs_disagree() -> None:
    records = [("t::a", ab({"pair_ratios": [1.0, 1.01, 0.99]})), ("t::b", ab({"pair_ratios": [0.96, 1.04, 1.0]})),
               ("t::new", None)]
    line = process_effects(records, 0.03)
    assert line is not None and line.startswith("process effects of ±4.2 %") and "t::b" in line
    assert process_effects(records[:1], 0.03) is None


def test_a_steady_test_the_pairs_place_past_a_third_of_the_band_is_said_not_failed() -> None:
    def steady(ratio: float, claim: list[float], tolerance: float = 0.03) -> dict:
        return {"verdict": "steady", "max_slowdown": tolerance, "pair_ratios": [ratio] * 3, "between_cv": 0.001,
                "changes": {"time": {"ratio": ratio, "ci": claim, "claim_ci": claim, "now": 1.024e-3,
                                     "reference": 1e-3},
                            "fraction": {"now": 0.5, "reference": 0.5}}}

    # a third of a 3 % band is 1.01: a 99 % interval from 1.012 is past it, one from 1.008 is not
    slower, unsure = steady(1.024, [1.012, 1.037]), steady(1.02, [1.008, 1.033])
    faster = steady(0.975, [0.962, 0.988])  # 0.988 < 1 / 1.01 = 0.9901
    assert inside_band_move(ab(slower)) == ("slower, inside the ±3% band (max_slowdown): time ×1.024, "
                                        "99% interval [1.012, 1.037]")
    assert inside_band_move(ab(unsure)) is None
    assert (inside_band_move(ab(faster)) or "").startswith("faster, inside the ±3% band (max_slowdown): time ×0.975")
    # the faster side mirrors on the log scale: below 1 / 1.01 = 0.990099, not below 1 - 0.01 = 0.99
    assert (inside_band_move(ab(steady(0.98, [0.97, 0.99005]))) or "").startswith("faster")
    assert inside_band_move(ab(steady(1.02, [1.009, 1.03]))) is None  # short of a third of the band
    assert inside_band_move(ab(steady(1.024, [1.012, 1.037], tolerance=0.06))) is None  # a third of 6 %: 1.02
    assert (inside_band_move(ab(steady(1.024, [1.012, 1.037], tolerance=0.025))) or "").startswith(
        "slower, inside the ±2.5% band")
    assert inside_band_move(ab({**slower, "changes": {"time": {"ratio": 1.024, "claim_ci": None}}})) is None
    assert inside_band_move(ab({**slower, "verdict": "worse"})) is None  # a failed test says more already
    lines = summary_lines("HEAD~1", "0" * 40, [("t::slower", ab(slower)), ("t::unsure", ab(unsure)),
                                                ("t::new", None)])
    assert "  steady: t::slower: slower, inside the ±3% band (max_slowdown): time ×1.024" in "\n".join(lines)
    assert not any("t::unsure:" in line for line in lines)


def test_an_a_b_block_reads_typed_and_writes_back_unchanged() -> None:
    # the block as judge_compare writes it: the comparison, REF, the band and the process pairs' record
    pairs = twelve(1.08)
    result = compare_regions([region(1.08, pairs)], Tolerances(0.1, 0.03, ("time", "fraction")), "REF", None)
    assert result is not None
    written = json.loads(json.dumps({**result.to_dict(), "ref": "HEAD~1", "commit": "c" * 40, "pairs": 30,
                                     "max_drop": 0.1, "max_slowdown": 0.03, "auto_band": True,
                                     "ref_outcome": "passed", **process_record([region(1.08, pairs)])}))
    block = ab(written)
    assert block.to_dict() == written  # every key kept, typed or in extra
    assert block.verdict == "regressed" and block.compared and block.failed_on == ("time",)
    # the pairs' geometric mean (the t-interval's), with the claim interval's level at the last look
    assert block.time is not None and block.time.ratio == pytest.approx((1.0692 * 1.08 * 1.0908) ** (1 / 3))
    assert block.time.claim_level == pytest.approx(0.993) and "claim_level" not in block.time.extra
    assert block.time.now == pytest.approx(1.08e-3) and block.time.reference == pytest.approx(1e-3)
    assert block.pair_ratios == tuple(pairs) and block.process_pairs == 12 and block.auto_band
    assert block.extra["ref_outcome"] == "passed" and block.extra["sites"][0]["label"] == "step"
    # through the test's record too
    record = TestRecord.from_dict({"nodeid": "t", "compare": written})
    assert record.compare == block and record.to_dict()["compare"] == written
    # a test that was not compared, and values of the wrong type
    error = ab({"verdict": "error", "explanation": "the REF twin crashed"})
    assert not error.compared and error.to_dict() == {"verdict": "error", "explanation": "the REF twin crashed"}
    odd = ab({"verdict": 3, "pairs": True, "pair_ratios": [1.0, "x"], "changes": {"time": {"ratio": "1.1"}}})
    assert (odd.verdict, odd.pairs, odd.pair_ratios) == (None, None, (1.0,))
    assert odd.time is not None and odd.time.ratio is None and not odd.compared


def test_a_b_records_stay_out_of_baselines() -> None:
    assert _measured(TestRecord("t", fraction=0.5))
    assert not _measured(TestRecord("t", fraction=0.5, compare=ab({"verdict": "steady"})))


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


def test_the_pool_never_calls_new_a_test_this_checkouts_twin_lacks(tmp_path: Path) -> None:
    """``missing``: this checkout's own twin lacking the id is an error (unstable ids), never ``new``; a REF twin
    lacking it says why with REF's evidence."""
    from types import SimpleNamespace

    from pytest_roofline.ab.parity import Missing
    from pytest_roofline.ab.pool import TwinPool

    def twin(ids: set[str], verdict: str = "new") -> Any:
        return SimpleNamespace(nodeids=ids, error=None, log=tmp_path / "twin.log",
                               missing=lambda nodeid: Missing(verdict, f"{nodeid}: REF's evidence"))

    pool = TwinPool([(twin({"t.py::a"}), twin({"t.py::a", "t.py::b"})),
                     (twin({"t.py::a", "t.py::b"}), twin({"t.py::a", "t.py::b"}))])
    assert pool.missing("t.py::b").verdict == "error"  # pair 0's own twin did not collect it
    assert "this checkout's twin did not collect t.py::b" in pool.missing("t.py::b").explanation
    pool = TwinPool([(twin({"t.py::a", "t.py::c"}), twin({"t.py::a"}))])
    assert pool.missing("t.py::c") == Missing("new", "t.py::c: REF's evidence")


def test_a_line_cut_short_is_a_closed_channel() -> None:
    """A twin that dies while it writes leaves half a JSON line: the pipe is closed, not a JSONDecodeError."""
    import socket

    from pytest_roofline.ab.channel import Channel
    from pytest_roofline.errors import ChannelClosed

    ours, theirs = socket.socketpair()
    theirs.sendall(b'{"op": "rea\n')
    theirs.close()
    with pytest.raises(ChannelClosed, match="not a message"):
        Channel(ours).receive()


def test_the_pool_starts_further_pairs_only_when_asked_and_stops_growing_when_one_cannot_start(
        tmp_path: Path) -> None:
    from types import SimpleNamespace

    from pytest_roofline.ab.pool import TwinPool
    from pytest_roofline.errors import CompareError

    def twin() -> Any:
        return SimpleNamespace(nodeids={"t.py::a"}, error=None, log=tmp_path / "twin.log",
                               process=SimpleNamespace(pid=0, poll=lambda: None))

    started: list[int] = []

    def starter(number: int) -> Any:
        started.append(number)
        if number == 4:
            raise CompareError("--roofline-compare: the twin in /ref did not start")
        return (twin(), twin())

    pool = TwinPool([(twin(), twin()) for _ in range(3)], starter=starter, limit=6, room=lambda pids: None)
    assert started == [] and len(pool.pairs) == 3  # nothing started before a call site asks
    assert pool.grow() and started == [3] and len(pool.pairs) == 4
    assert not pool.grow() and started == [3, 4] and len(pool.pairs) == 4  # the fifth failed: no sixth tried
    assert pool.limit == 4 and pool.grow_error is not None and "did not start" in pool.grow_error
    assert not pool.grow() and started == [3, 4]
    fixed = TwinPool([(twin(), twin())])  # no starter: a fixed pool never grows
    assert not fixed.grow() and fixed.limit == 1


class ScriptedTwin:
    """A twin at the message level: one test with one call site; each turn takes ``seconds``; records whether
    the comparing side asked it for its region at the site's end (a region costs the twin a counted call)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.nodeids = {"t.py::a"}
        self.error: str | None = None
        self.finished: dict[str, Any] = {}
        self.replies: list[dict[str, Any]] = []
        self.asked: list[bool] = []  # per site_end: was the region asked for

    def begin_test(self, nodeid: str) -> Any:
        from pytest_roofline.ab.twin import TestLink

        self.replies.append({"op": "ready", "site": 0, "label": "f"})
        return TestLink(self, nodeid)  # type: ignore[arg-type]

    def send(self, **message: Any) -> None:
        op = message["op"]
        if op in ("warm", "discard", "call"):
            self.replies.append({"op": "t", "s": self.seconds, "faults": 0})
        elif op == "site_end":
            self.asked.append(bool(message.get("region")))
            self.replies.append({"op": "site", "region": {"t_min_s": 1e-3, "flops": 1.0} if message.get("region")
                                 else None})
            self.replies.append({"op": "test_done", "outcome": "passed"})

    def receive(self) -> dict[str, Any]:
        return self.replies.pop(0)

    def end_test(self, link: Any) -> dict[str, Any]:
        return {"op": "test_done", "outcome": "passed"}


def test_only_one_ref_twin_per_call_site_counts_its_call_and_sends_its_region() -> None:
    from pytest_roofline.ab.pool import PoolLink

    pool = [(ScriptedTwin(1e-3), ScriptedTwin(1e-3 * (1 + 0.01 * k))) for k in range(3)]
    link = PoolLink("t.py::a", pool, seed=0)  # type: ignore[arg-type]
    for _ in range(3):
        assert link.join(0) is not None
    result = link.measure_site("f", None, None, TimingPolicy(max_time_s=0.05), 0.03)
    assert result is not None and len(result.pairs) == 3
    assert [ref.asked for _, ref in pool] == [[True], [False], [False]]  # pair 0's REF twin only
    assert [this.asked for this, _ in pool] == [[False]] * 3  # this checkout's work is counted here
    assert result.ref_region() is not None and result.ref_region()["t_min_s"] == 1e-3


class ScriptedChannel:
    """A twin's channel that hands out a script of messages and keeps what the twin sent."""

    def __init__(self, inbox: list[dict[str, Any]]) -> None:
        self.inbox = inbox
        self.sent: list[dict[str, Any]] = []

    def send(self, **message: Any) -> None:
        self.sent.append(message)

    def receive(self) -> dict[str, Any]:
        return self.inbox.pop(0)


def test_a_twin_counts_its_call_only_when_its_region_is_asked_for() -> None:
    from types import SimpleNamespace

    from pytest_roofline.ab.follower import Follower

    class Counter:
        counted = 0

        def count(self, fn: Any, args: Any, kwargs: Any) -> tuple[Any, list[Any]]:
            Counter.counted += 1
            return fn(*args, **kwargs), []

    class Recorder:
        def region(self, counter: Any, label: str, kernels: Any, timing: Any, roofs: Any = None) -> Any:
            return SimpleNamespace(to_dict=lambda: {"label": label, "kernels": kernels})

    calls: list[int] = []
    for asked, counts in ((False, 0), (True, 1)):
        Counter.counted = 0
        channel = ScriptedChannel([{"op": "begin"}, {"op": "call", "batch": 1}, {"op": "site_end", "region": asked}])
        follower = Follower(channel)  # type: ignore[arg-type]
        site = follower.measure_site(Recorder(), Counter(), "f",  # type: ignore[arg-type]
                                     lambda x: calls.append(x) or x, (3,), {}, None)
        assert site == 3
        assert Counter.counted == counts
        assert (channel.sent[-1]["region"] is not None) == asked


def test_a_twin_skips_the_untimed_call_only_where_the_turn_says_so() -> None:
    from pytest_roofline.ab.lockstep import follow

    class Calls:
        runs = 0

        def run(self) -> tuple[float, int, int]:
            Calls.runs += 1
            return 1e-3, 0, 0

    # warm: 1 call, never rewarmed; timed turns of 2 and 1 calls, each after one untimed call (2 more) unless
    # the turn says not
    for rewarm, runs in ((None, 1 + 3 + 2), (True, 6), (False, 1 + 3)):
        Calls.runs = 0
        said = {} if rewarm is None else {"rewarm": rewarm}
        script = [{"op": "begin"}, {"op": "warm", "batch": 1, "rewarm": True}, {"op": "call", "batch": 2, **said},
                  {"op": "call", "batch": 1, **said}, {"op": "site_end", "region": False}]
        assert follow(ScriptedChannel(script), Calls(), 0, "f", lambda timing, roofs: {})  # type: ignore[arg-type]
        assert Calls.runs == runs


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


def test_the_pool_size_is_one_number_in_the_option_the_settings_and_the_pool() -> None:
    from pytest_roofline.ab.pairs import MAX_PROCESS_PAIRS
    from pytest_roofline.plugin.options import _OPTIONS
    from pytest_roofline.session.settings import Settings

    option = next(default for flag, _, _, default in _OPTIONS if flag == "--roofline-compare-pairs")
    import dataclasses

    settings = next(f.default for f in dataclasses.fields(Settings) if f.name == "compare_pairs")
    assert int(option) == settings == MAX_PROCESS_PAIRS == 12


def test_the_compare_band_is_auto_by_default_in_the_option_and_the_settings() -> None:
    import dataclasses

    from pytest_roofline.plugin.options import _OPTIONS
    from pytest_roofline.session.settings import SettingError, Settings, parse_compare_max_slowdown

    option = next(default for flag, _, _, default in _OPTIONS if flag == "--roofline-compare-max-slowdown")
    settings = next(f.default for f in dataclasses.fields(Settings) if f.name == "compare_max_slowdown")
    assert option == "auto" and settings is None
    where = "--roofline-compare-max-slowdown"
    assert parse_compare_max_slowdown("auto", where) is None and parse_compare_max_slowdown(" Auto", where) is None
    assert parse_compare_max_slowdown("0.05", where) == 0.05
    for bad in ("loose", "0", "-0.1", "11"):
        with pytest.raises(SettingError, match=r"--roofline-compare-max-slowdown must be 'auto' \(2 % where the "
                                                r"process pairs agree within 2.5 %, else 3 %\) or a number > 0"):
            parse_compare_max_slowdown(bad, where)


def test_a_tests_auto_band_is_the_widest_its_call_sites_were_judged_with() -> None:
    from pytest_roofline.ab.verdict import sites_band

    def judged(band: float | None, compared: bool = True) -> dict[str, Any]:
        return {"compare": {"compared": compared, **({} if band is None else {"max_slowdown": band})}}

    assert sites_band([judged(0.02), judged(0.02)]) == 0.02
    assert sites_band([judged(0.02), judged(0.03)]) == 0.03
    assert sites_band([judged(0.02), judged(0.03, compared=False)]) == 0.02  # not compared: not judged
    assert sites_band([judged(None)]) == sites_band([]) == 0.03  # an older record: the wide band
    settled = {"compare": {"compared": True, "max_slowdown": 0.03, "settled": True}}
    assert sites_band([settled]) == sites_band([settled, settled]) == 0.03  # every site settled: the wide band
    assert sites_band([judged(0.02), settled]) == 0.02  # beside a site on 2 %: that site's claim is not blunted
    assert sites_band([judged(0.03), settled]) == 0.03


def test_a_failure_says_why_the_auto_band_is_that_wide() -> None:
    pairs = [1.026, 1.024, 1.025, 1.025]
    said = compare_regions([region(1.025, pairs)], Tolerances(0.1, 0.02, ("time",)), "REF", "compute:fp32")
    assert said is not None and said.verdict == "regressed"
    record = {"max_slowdown": 0.02, "max_drop": 0.1, "ref": "REF", "pairs": 40, "auto_band": True,
              **process_record([region(1.025, pairs)])}
    assert ("fails on: time rose more than max_slowdown 2% (auto: its process pairs agreed within 2.5%)"
            in failure_message("t", said, ab(record)))
    wide = {**record, "max_slowdown": 0.03}
    assert "max_slowdown 3% (auto: its process pairs spread more than 2.5%)" in failure_message("t", said, ab(wide))
    assert "max_slowdown 2%\n" in failure_message("t", said, ab({**record, "auto_band": False})) + "\n"


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


def test_a_records_last_look_is_read_as_a_pool_size_or_the_default() -> None:
    # two sites of twelve pairs each: combined pair by pair at the last look's level (99.3 %) when the records
    # say a pool of 12, at the interim level (99.99 %) when they say 20; nonsense reads as the default pool
    tolerances = Tolerances(0.1, 0.03, ("time",))
    levels = {}
    for look in (12, 20, "x", None):
        sites = [region(1.08, twelve(1.08)), region(1.08, twelve(1.08))]
        for site_record in sites:
            site_record["compare"]["last_look"] = look
        said = compare_regions(sites, tolerances, "REF", "compute:fp32")
        assert said is not None and said.time.claim_level is not None
        levels[look] = said.time.claim_level
    assert levels[12] == levels["x"] == levels[None] == pytest.approx(0.993)
    assert levels[20] == pytest.approx(1 - 0.001 / 17)
