"""The A/B interval over process pairs (ab/paired_stats.py): the t-interval over per-pair ratios by hand, the
claim's level at each look, the robust intervals a far pair leaves the claim to, and the stopping rule."""

from __future__ import annotations

import math

import pytest
from ab_fakes import ab, region, site, twelve

from pytest_roofline.ab.paired_stats import (
    CLAIM_ERROR,
    INTERIM_ERROR,
    LAST_ERROR,
    ROBUST_ERROR,
    PairedRatio,
    between_pairs,
    claim_confidence,
    decided,
    far_pair,
    level_text,
    signed_rank_critical,
    t95,
    t975,
    t_two_sided,
    yuen_interval,
)
from pytest_roofline.ab.verdict import compare_regions, process_record, verdict
from pytest_roofline.ab.verdict_text import failure_message
from pytest_roofline.gates.comparison import Tolerances


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
