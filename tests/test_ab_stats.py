"""The A/B statistic (ab/paired_stats.py) and the per-test verdict (ab/verdict.py) on hand-made pairs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_roofline.ab.paired_stats import (
    MIN_PAIRS,
    PairedRatio,
    combined_ratio,
    paired_ratio,
    walsh_averages,
)
from pytest_roofline.ab.twin import twin_arguments
from pytest_roofline.ab.verdict import compare_regions, verdict
from pytest_roofline.gates.comparison import Tolerances


def test_walsh_averages_and_the_hodges_lehmann_estimate_by_hand() -> None:
    # log ratios 0, 0.1, 0.3: Walsh averages 0, 0.05, 0.1, 0.15, 0.2, 0.3; their median is 0.125
    assert walsh_averages(np.array([0.0, 0.1, 0.3])).tolist() == pytest.approx([0, 0.05, 0.1, 0.15, 0.2, 0.3])
    result = paired_ratio([math.exp(v) for v in (0.0, 0.1, 0.3)], [1.0, 1.0, 1.0])
    assert result.ratio == pytest.approx(math.exp(0.125))
    assert result.ci is None and result.pairs == 3  # fewer than MIN_PAIRS: no interval


def test_a_constant_ratio_has_a_point_interval() -> None:
    ref = [1e-3 * (1 + 0.2 * math.sin(i)) for i in range(40)]  # the host moves; the pairs move together
    result = paired_ratio([1.05 * t for t in ref], ref)
    assert result.ratio == pytest.approx(1.05)
    assert result.ci == pytest.approx((1.05, 1.05))
    assert verdict(result, 0.03) == "slower"


def test_the_wilcoxon_interval_matches_its_order_statistics() -> None:
    # 20 log ratios -0.019 .. +0.019 step 0.002: 210 Walsh averages; the critical rank for n = 20 at 95 % is
    # floor(105 - 1.96 * sqrt(20 * 21 * 41 / 24)) = floor(105 - 52.4) = 52, so the interval runs from the 53rd
    # smallest to the 53rd largest Walsh average
    logs = np.arange(-0.019, 0.0195, 0.002)
    assert len(logs) == 20
    walsh = walsh_averages(logs)
    result = paired_ratio(np.exp(logs).tolist(), [1.0] * 20)
    assert result.ratio == pytest.approx(1.0, abs=1e-12)
    assert result.ci == pytest.approx((math.exp(walsh[52]), math.exp(walsh[-53])))
    assert verdict(result, 0.03) == "unchanged"


def test_verdicts() -> None:
    assert verdict(PairedRatio(1.06, (1.04, 1.08), 30), 0.03) == "slower"
    assert verdict(PairedRatio(1.06, (0.99, 1.13), 30), 0.03) == "inconclusive"
    assert verdict(PairedRatio(1.02, (1.01, 1.03), 30), 0.03) == "unchanged"  # significant, within tolerance
    assert verdict(PairedRatio(0.9, (0.88, 0.92), 30), 0.03) == "faster"
    assert verdict(PairedRatio(1.5, None, 5), 0.03) == "inconclusive"
    assert MIN_PAIRS == 10


def test_call_sites_combine_by_ref_time_share() -> None:
    # 3 ms at ratio 1.0 and 1 ms at ratio 2.0: exp((3 log 1 + 1 log 2) / 4) = 2 ** 0.25
    sites = [(3e-3, PairedRatio(1.0, (0.99, 1.01), 30)), (1e-3, PairedRatio(2.0, (1.9, 2.1), 30))]
    combined = combined_ratio(sites)
    assert combined.ratio == pytest.approx(2 ** 0.25)
    assert combined.ci is not None and combined.ci[0] == pytest.approx(math.exp((3 * math.log(0.99) +
                                                                                 math.log(1.9)) / 4))
    assert combined.pairs == 60


def region(time_s: float, t_min: float, flops: float, ref_time: float, ref_flops: float, ratio: float) -> dict:
    ref = {"time_s": ref_time, "t_min_s": t_min * ref_flops / flops, "flops_by_precision": {"fp32": ref_flops},
           "bytes": {}}
    return {"time_s": time_s, "t_min_s": t_min, "flops_by_precision": {"fp32": flops}, "bytes": {},
            "compare": {"compared": True, "ratio": ratio, "ci": [ratio * 0.99, ratio * 1.01], "pairs": 40,
                        "ref": ref}}


def test_twice_the_work_reads_as_work_at_the_same_fraction() -> None:
    # this side: 2e8 FLOPs in 4 ms (t_min 2 ms, fraction 0.5); REF: 1e8 FLOPs in 2 ms (t_min 1 ms, 0.5)
    result = compare_regions([region(4e-3, 2e-3, 2e8, 2e-3, 1e8, 2.0)], Tolerances(0.1, 0.03, ("time", "fraction")),
                             "REF main (abc)", "compute:fp32")
    assert result is not None
    assert result.verdict == "regressed" and result.failed_on == ("time",)
    assert result.fraction.now == pytest.approx(0.5) and result.fraction.reference == pytest.approx(0.5)
    assert result.explanation == "time ×2.00 against REF main (abc): work ×2.00 at the same fraction (0.50)"


def test_the_same_work_slower_reads_as_a_lower_fraction_and_one_side_only_is_not_compared() -> None:
    result = compare_regions([region(1.25e-3, 1e-3, 1e8, 1e-3, 1e8, 1.25)],
                             Tolerances(0.1, 0.03, ("time", "fraction")), "REF main (abc)", "compute:fp32")
    assert result is not None and result.failed_on == ("time", "fraction")
    assert result.explanation == "time ×1.25 against REF main (abc) at the same work: fraction 1.00 → 0.80"
    assert compare_regions([{"time_s": 1e-3, "compare": {"compared": False}}], Tolerances(0.1, 0.03, ("time",)),
                           "REF", None) is None


def test_the_twin_does_not_inherit_what_it_must_not() -> None:
    args = ["tests", "-k", "conv", "--roofline", "-n", "2", "--roofline-compare", "main", "--junitxml=out.xml",
            "--roofline-dir", "/tmp/x", "-x", "-m", "roofline", "--roofline-cores=all"]
    assert twin_arguments(args) == ["tests", "-k", "conv", "-m", "roofline"]
