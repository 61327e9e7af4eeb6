"""The roofline model against numbers worked out by hand."""

from __future__ import annotations

import math

import pytest

from pytest_roofline.model import (
    KernelSample,
    Machine,
    MissingCeilingError,
    combine,
    evaluate,
    evaluate_region,
    lower_bound,
)

# Round numbers so every expectation below is exact arithmetic: 100 GFLOP/s fp32, 50 GFLOP/s fp64,
# 400 GFLOP/s bf16; 200 GB/s L2, 20 GB/s DRAM.
MACHINE = Machine(
    "hand",
    peak_flops={"fp32": 100e9, "fp64": 50e9, "bf16": 400e9},
    bandwidth={"L2": 200e9, "DRAM": 20e9},
)


def test_gemm_is_compute_bound_and_fraction_is_achieved_over_peak() -> None:
    m = n = k = 1000
    flops = 2 * m * n * k  # 2e9
    moved = 4 * (m * k + k * n + m * n)  # 12e6 bytes
    sample = KernelSample("gemm", {"fp32": flops}, {"DRAM": moved}, time_s=0.04)
    verdict = evaluate(sample, MACHINE)
    # compute 2e9/100e9 = 0.02 s; memory 12e6/20e9 = 0.0006 s
    assert verdict.t_min == pytest.approx(0.02)
    assert verdict.bound == "compute:fp32"
    assert verdict.fraction == pytest.approx(0.5)
    assert verdict.ai["DRAM"] == pytest.approx(2e9 / 12e6)
    assert verdict.headroom == pytest.approx(2.0)
    # classic form: achieved FLOP/s over min(peak, AI*BW) = (2e9/0.04) / 100e9
    assert verdict.fraction == pytest.approx((flops / 0.04) / min(100e9, verdict.ai["DRAM"] * 20e9))


def test_copy_has_no_flops_and_is_judged_against_bandwidth() -> None:
    n = 10_000_000
    sample = KernelSample("copy", {}, {"DRAM": 2 * 4 * n}, time_s=0.008)
    verdict = evaluate(sample, MACHINE)
    # 80e6 bytes / 20e9 B/s = 4 ms lower bound; measured 8 ms
    assert verdict.bound == "memory:DRAM"
    assert verdict.t_min == pytest.approx(0.004)
    assert verdict.fraction == pytest.approx(0.5)
    assert verdict.ai == {"DRAM": 0.0}


def test_hierarchical_bound_picks_the_slowest_level() -> None:
    # 1e9 bytes at L2 (5 ms) but only 0.05e9 at DRAM (2.5 ms): L2 binds.
    bound = lower_bound({"fp32": 1e8}, {"L2": 1e9, "DRAM": 0.05e9}, MACHINE)
    assert bound.bound == "memory:L2"
    assert bound.t_min == pytest.approx(0.005)
    assert bound.terms["compute:fp32"] == pytest.approx(0.001)


def test_mixed_precisions_add_up_and_bound_names_the_costliest() -> None:
    # fp64: 1e9/50e9 = 20 ms; bf16: 4e9/400e9 = 10 ms; total compute 30 ms > memory 1 ms
    bound = lower_bound({"fp64": 1e9, "bf16": 4e9}, {"DRAM": 20e6}, MACHINE)
    assert bound.t_min == pytest.approx(0.03)
    assert bound.bound == "compute:fp64"


def test_region_fraction_is_sum_of_lower_bounds_over_time() -> None:
    gemm = KernelSample("gemm", {"fp32": 2e9}, {"DRAM": 12e6})  # t_min 20 ms
    copy = KernelSample("copy", {}, {"DRAM": 80e6})  # t_min 4 ms
    verdict = evaluate_region([gemm, copy], MACHINE, time_s=0.048)
    assert verdict.t_min == pytest.approx(0.024)
    assert verdict.fraction == pytest.approx(0.5)
    assert verdict.bound == "compute:fp32"
    assert verdict.bound_shares["memory:DRAM"] == pytest.approx(4 / 24)
    assert verdict.flops == {"fp32": 2e9}
    assert verdict.bytes == {"DRAM": 92e6}


def test_combine_regions_of_one_test() -> None:
    a = evaluate_region([KernelSample("a", {"fp32": 1e9}, {})], MACHINE, 0.02)  # 10 ms of 20
    b = evaluate_region([KernelSample("b", {}, {"DRAM": 2e8})], MACHINE, 0.04)  # 10 ms of 40
    both = combine([a, b])
    assert both.fraction == pytest.approx(0.02 / 0.06)
    assert both.bound_shares == {"compute:fp32": pytest.approx(0.5), "memory:DRAM": pytest.approx(0.5)}


def test_hbm_and_dram_names_find_each_other() -> None:
    gpu = Machine("gpu", {"fp32": 1e12}, {"HBM": 1e12})
    assert evaluate(KernelSample("k", {}, {"DRAM": 1e9}, 0.002), gpu).fraction == pytest.approx(0.5)


def test_missing_ceiling_names_what_exists() -> None:
    with pytest.raises(MissingCeilingError, match=r"precision 'fp16' \(it has: bf16, fp32, fp64\)"):
        lower_bound({"fp16": 1.0}, {}, MACHINE)
    with pytest.raises(MissingCeilingError, match="memory level 'L1'"):
        lower_bound({}, {"L1": 1.0}, MACHINE)


def test_no_work_means_no_bound() -> None:
    verdict = evaluate(KernelSample("idle", {}, {}, 1e-3), MACHINE)
    assert verdict.bound == "none"
    assert verdict.fraction == 0.0
    assert math.isinf(verdict.headroom)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_bad_times_and_ceilings_are_rejected(bad: float) -> None:
    with pytest.raises(ValueError, match="time_s"):
        evaluate(KernelSample("k", {"fp32": 1.0}, {}), MACHINE, time_s=bad)
    with pytest.raises(ValueError, match="peak_flops"):
        Machine("m", {"fp32": bad}, {})


def test_machine_round_trips_through_a_dict() -> None:
    assert Machine.from_dict(MACHINE.to_dict()) == MACHINE
