"""The baseline gate's statistic (gates/baseline_stats.py) on hand-made sessions: t_min is 1 ms, so a
session whose rounds take 2 ms has fraction 0.5."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_roofline.gates.baseline_stats import (
    MIN_POOLED_DF,
    Measurement,
    Spread,
    compare_quantity,
    pooled_spread,
)
from pytest_roofline.record.tests import TestRecord

T_MIN = 1e-3


def compare(current: Measurement, baseline: list[Measurement], max_drop: float, **kwargs: object):
    return compare_quantity(current, baseline, "fraction", max_drop, **kwargs)  # type: ignore[arg-type]


def session(fraction: float, rounds: int = 30, jitter: float = 0.0, seed: int = 0) -> Measurement:
    """Rounds around t_min / fraction, with a relative jitter spread evenly over +-jitter (no luck involved)."""
    base = T_MIN / fraction
    spread = np.linspace(-jitter, jitter, rounds)
    np.random.default_rng(seed).shuffle(spread)
    samples = base * (1 + spread)
    record = {"fraction": T_MIN / float(np.median(samples)), "time_s": float(np.median(samples)),
              "regions": [{"t_min_s": T_MIN, "timing": {"samples_s": samples.tolist()}}]}
    measured = Measurement.from_record(TestRecord.from_dict({"nodeid": "t", **record}))
    assert measured is not None
    return measured


def test_identical_samples_are_steady_with_a_point_interval() -> None:
    baseline = [session(0.5) for _ in range(3)]
    result = compare(session(0.5), baseline, 0.10)
    assert result.verdict == "same"
    assert result.ratio == pytest.approx(1.0)
    assert result.ci == pytest.approx((1.0, 1.0))
    assert result.spread is not None and result.spread.sigma == 0.0


def test_a_25_percent_drop_with_tight_sessions_is_a_regression() -> None:
    baseline = [session(f, jitter=0.01, seed=i) for i, f in enumerate((0.500, 0.501, 0.499, 0.502, 0.498))]
    result = compare(session(0.375, jitter=0.01, seed=9), baseline, 0.10)
    assert result.verdict == "worse"
    assert result.reference == pytest.approx(0.500, abs=1e-3)
    assert 1 - result.ratio == pytest.approx(0.25, abs=2e-3)
    assert result.ci[1] < 0.8  # the interval is narrow: sessions agree to 0.2 %


def test_a_25_percent_drop_is_not_significant_when_sessions_spread_widely() -> None:
    # Every session's own rounds are tight, but sessions differ by a factor 2.7: the rounds of one session
    # would say "significant"; the spread between sessions says it is not.
    fractions = (0.30, 0.50, 0.80, 0.45, 0.70)
    baseline = [session(f, jitter=0.005, seed=i) for i, f in enumerate(fractions)]
    result = compare(session(0.375, jitter=0.005), baseline, 0.10)
    sd = float(np.std(np.log(fractions), ddof=1))
    assert result.spread is not None and result.spread.sigma == pytest.approx(sd)
    assert 1 - result.ratio == pytest.approx(0.25, abs=2e-3)
    assert result.verdict == "noisy"
    assert result.ci[1] > 1.0


def test_a_drop_smaller_than_max_drop_is_steady_however_significant() -> None:
    baseline = [session(0.5, jitter=0.01, seed=i) for i in range(5)]
    result = compare(session(0.47, jitter=0.01), baseline, 0.10)  # 6 % lower
    assert result.verdict == "same"
    assert result.ci[1] < 1.0  # significant, but within the allowed drop


def test_one_baseline_session_is_inconclusive_without_a_pooled_spread() -> None:
    # no spread of its own (1 session) and none from other tests: never a failure from a guessed spread
    result = compare(session(0.375), [session(0.5)], 0.10)
    assert result.verdict == "inconclusive" and result.ci is None
    assert result.ratio == pytest.approx(0.75)


def test_one_baseline_session_is_judged_with_the_pooled_spread() -> None:
    # ratio 0.75; with sd 0.05 of the log and a t of 40 df the interval's upper end is about
    # 0.75 * exp(2.02 * 0.05) = 0.83
    spread = Spread(0.05, 40, "pooled")
    result = compare(session(0.375), [session(0.5)], 0.10, pooled=spread)
    assert result.verdict == "worse" and result.spread == spread
    assert result.ci is not None and result.ci[1] == pytest.approx(0.75 * math.exp(2.02 * 0.05), abs=0.01)


def test_two_sessions_use_the_pooled_spread_not_their_own() -> None:
    wide = Spread(0.5, 40, "pooled")
    result = compare(session(0.375), [session(0.5), session(0.5)], 0.10, pooled=wide)
    assert result.spread == wide and result.verdict == "noisy"  # a 25 % drop inside a 50 % spread


def test_pooled_spread_weights_each_test_by_its_degrees_of_freedom() -> None:
    # test A: log values -d, +d (1 df, sum of squares 2 d^2); test B: -d, 0, +d (2 df, 2 d^2); test C: 3 values
    d = 0.1
    a = [math.exp(-d), math.exp(d)]
    b = [math.exp(-d), 1.0, math.exp(d)]
    spread = pooled_spread([a, b, b, [0.7]])
    assert spread is not None and spread.df == 5
    assert spread.sigma == pytest.approx(math.sqrt(6 * d * d / 5))
    assert pooled_spread([a, b]) is None  # 3 df < MIN_POOLED_DF
    assert MIN_POOLED_DF == 4


def test_time_is_worse_when_it_rises_beyond_max_slowdown() -> None:
    # the same fraction ratio read as time: rounds 2 ms -> 2.5 ms is time x1.25
    baseline = [session(0.5, jitter=0.01, seed=i) for i in range(5)]
    now = session(0.4, jitter=0.01, seed=9)
    result = compare_quantity(now, baseline, "time", 0.10)
    assert result.ratio == pytest.approx(1.25, abs=2e-3)
    assert result.reference == pytest.approx(2e-3, rel=2e-3)
    assert result.verdict == "worse" and result.ci is not None and result.ci[0] > 1.0
    assert compare_quantity(now, baseline, "time", 0.30).verdict == "same"  # within a 30 % tolerance
    assert compare_quantity(baseline[0], [now] * 3, "time", 0.10).verdict == "better"


def test_a_clear_gain_is_an_improvement_and_the_result_is_reproducible() -> None:
    baseline = [session(0.4, jitter=0.01, seed=i) for i in range(4)]
    first = compare(session(0.6, jitter=0.01), baseline, 0.10, seed=7)
    again = compare(session(0.6, jitter=0.01), baseline, 0.10, seed=7)
    assert first.verdict == "better"
    assert first.ratio == pytest.approx(1.5, abs=0.01)
    assert first.ci == again.ci


def test_regions_and_parts_combine_like_the_verdict() -> None:
    # region 1: t_min 1 ms, median 2 ms; region 2 (two call sites timed apart): t_min 2 ms, medians 1 + 3 ms.
    # sum(t_min) / sum(median) = 3 / 6 = 0.5
    record = {"fraction": 0.5, "regions": [
        {"t_min_s": 1e-3, "timing": {"samples_s": [1e-3, 2e-3, 3e-3]}},
        {"t_min_s": 2e-3, "timing": {"samples_s": []}, "parts": [
            {"timing": {"samples_s": [1e-3, 1e-3, 1e-3]}}, {"timing": {"samples_s": [3e-3, 3e-3, 3e-3]}}]},
    ]}
    measured = Measurement.from_record(TestRecord.from_dict({"nodeid": "t", **record}))
    assert measured is not None
    assert measured.time_s == pytest.approx(6e-3)  # no time_s recorded: the sum of the medians
    assert len(measured.regions[1][1]) == 2


def test_a_record_without_rounds_keeps_its_time_and_one_without_fraction_is_none() -> None:
    fixed = Measurement.from_record(TestRecord("t", fraction=0.25, regions=({"t_min_s": 1e-3, "time_s": 4e-3,
                                                                              "timing": {}},)))
    assert fixed is not None
    assert fixed.resample(np.random.default_rng(0), 5).tolist() == pytest.approx([0.25] * 5)
    assert fixed.resample(np.random.default_rng(0), 5, "time").tolist() == pytest.approx([4e-3] * 5)
    assert Measurement.from_record(TestRecord("t", fraction=None)) is None
    assert Measurement.from_record(TestRecord.from_dict({"nodeid": "t", "fraction": float("nan")})) is None


def test_no_baseline_is_an_error_of_the_caller() -> None:
    with pytest.raises(ValueError, match="at least one"):
        compare(session(0.5), [], 0.1)
