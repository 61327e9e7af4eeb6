"""A fraction above 1.05 is named as a modeling error, with the roof it beat and the likely cause."""

from __future__ import annotations

from pytest_roofline.model import KernelSample, Machine, evaluate_region
from pytest_roofline.model.above_one import above_one_note

MACHINE = Machine(name="m", peak_flops={"fp32": 100e9}, bandwidth={"L3": 200e9, "DRAM": 20e9})


def test_compute_bound_above_one_names_the_compute_roof() -> None:
    # 1.1 GFLOP in 10 ms on a 100 GFLOP/s roof: t_min = 11 ms, fraction 1.1.
    verdict = evaluate_region([KernelSample("k", {"fp32": 1.1e9}, {})], MACHINE, 0.010)
    note = above_one_note(verdict, MACHINE)
    assert note is not None and note.startswith("fraction 1.100 is above 1: the call beat the fp32 compute roof "
                                                 "(100 GFLOP/s)")


def test_memory_bound_above_one_names_the_level_and_placement() -> None:
    # 0.3 GB at DRAM in 10 ms on a 20 GB/s roof: t_min = 15 ms, fraction 1.5.
    verdict = evaluate_region([KernelSample("copy", {}, {"DRAM": 0.3e9})], MACHINE, 0.010)
    note = above_one_note(verdict, MACHINE)
    assert note is not None and "beat the DRAM bandwidth roof (20 GB/s)" in note and "placement" in note


def test_at_or_below_one_point_oh_five_says_nothing() -> None:
    verdict = evaluate_region([KernelSample("k", {"fp32": 1.05e9}, {})], MACHINE, 0.010)
    assert above_one_note(verdict, MACHINE) is None
