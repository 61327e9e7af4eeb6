"""The baseline gate's statistic (measure/baseline_stats.py) on hand-made sessions: t_min is 1 ms, so a
session whose rounds take 2 ms has fraction 0.5."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_roofline.measure.baseline_stats import SINGLE_SESSION_SIGMA, Measurement, compare

T_MIN = 1e-3


def session(fraction: float, rounds: int = 30, jitter: float = 0.0, seed: int = 0) -> Measurement:
    """Rounds around t_min / fraction, with a relative jitter spread evenly over +-jitter (no luck involved)."""
    base = T_MIN / fraction
    spread = np.linspace(-jitter, jitter, rounds)
    np.random.default_rng(seed).shuffle(spread)
    samples = base * (1 + spread)
    record = {"fraction": T_MIN / float(np.median(samples)),
              "regions": [{"t_min_s": T_MIN, "timing": {"samples_s": samples.tolist()}}]}
    measured = Measurement.from_record(record)
    assert measured is not None
    return measured


def test_identical_samples_are_steady_with_a_point_interval() -> None:
    baseline = [session(0.5) for _ in range(3)]
    result = compare(session(0.5), baseline, 0.10)
    assert result.verdict == "steady"
    assert result.ratio == pytest.approx(1.0)
    assert result.ci == pytest.approx((1.0, 1.0))
    assert result.session_sigma == 0.0


def test_a_25_percent_drop_with_tight_sessions_is_a_regression() -> None:
    baseline = [session(f, jitter=0.01, seed=i) for i, f in enumerate((0.500, 0.501, 0.499, 0.502, 0.498))]
    result = compare(session(0.375, jitter=0.01, seed=9), baseline, 0.10)
    assert result.verdict == "regressed"
    assert result.baseline_fraction == pytest.approx(0.500, abs=1e-3)
    assert result.drop == pytest.approx(0.25, abs=2e-3)
    assert result.ci[1] < 0.8  # the interval is narrow: sessions agree to 0.2 %


def test_a_25_percent_drop_is_not_significant_when_sessions_spread_widely() -> None:
    # Every session's own rounds are tight, but sessions differ by a factor 2.7: the rounds of one session
    # would say "significant"; the spread between sessions says it is not.
    fractions = (0.30, 0.50, 0.80, 0.45, 0.70)
    baseline = [session(f, jitter=0.005, seed=i) for i, f in enumerate(fractions)]
    result = compare(session(0.375, jitter=0.005), baseline, 0.10)
    sd = float(np.std(np.log(fractions), ddof=1))
    assert result.session_sigma == pytest.approx(sd)
    assert result.drop == pytest.approx(0.25, abs=2e-3)
    assert result.verdict == "noisy"
    assert result.ci[1] > 1.0


def test_a_drop_smaller_than_max_drop_is_steady_however_significant() -> None:
    baseline = [session(0.5, jitter=0.01, seed=i) for i in range(5)]
    result = compare(session(0.47, jitter=0.01), baseline, 0.10)  # 6 % lower
    assert result.verdict == "steady"
    assert result.ci[1] < 1.0  # significant, but within the allowed drop


def test_one_baseline_session_assumes_the_documented_spread() -> None:
    # ratio 0.75; with sd 0.05 of the log the interval's upper end is about 0.75 * exp(1.96 * 0.05) = 0.83
    result = compare(session(0.375), [session(0.5)], 0.10)
    assert result.session_sigma == SINGLE_SESSION_SIGMA
    assert result.verdict == "regressed"
    assert result.ci[1] == pytest.approx(0.75 * math.exp(1.96 * SINGLE_SESSION_SIGMA), abs=0.01)


def test_a_clear_gain_is_an_improvement_and_the_result_is_reproducible() -> None:
    baseline = [session(0.4, jitter=0.01, seed=i) for i in range(4)]
    first = compare(session(0.6, jitter=0.01), baseline, 0.10, seed=7)
    again = compare(session(0.6, jitter=0.01), baseline, 0.10, seed=7)
    assert first.verdict == "improved"
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
    measured = Measurement.from_record(record)
    assert measured is not None
    assert measured.medians_fraction() == pytest.approx(0.5)
    assert len(measured.regions[1][1]) == 2


def test_a_record_without_rounds_keeps_its_time_and_one_without_fraction_is_none() -> None:
    fixed = Measurement.from_record({"fraction": 0.25, "regions": [{"t_min_s": 1e-3, "time_s": 4e-3,
                                                                     "timing": {}}]})
    assert fixed is not None
    assert fixed.resample(np.random.default_rng(0), 5).tolist() == pytest.approx([0.25] * 5)
    assert Measurement.from_record({"fraction": None, "regions": []}) is None
    assert Measurement.from_record({"fraction": float("nan")}) is None


def test_no_baseline_is_an_error_of_the_caller() -> None:
    with pytest.raises(ValueError, match="at least one"):
        compare(session(0.5), [], 0.1)
