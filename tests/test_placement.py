"""Placing counted bytes at the level that holds the working set."""

from __future__ import annotations

import pytest

from pytest_roofline.model import KernelSample, Machine
from pytest_roofline.model.placement import place_working_set, serving_level

MACHINE = Machine(
    "hand",
    {"fp32": 100e9},
    {"L1": 400e9, "L2": 200e9, "DRAM": 20e9},
    info={"capacities": {"L1": 64 * 1024, "L2": 4 * 2**20, "L3": 64 * 2**20}},
)


@pytest.mark.parametrize(
    ("footprint", "level"),
    [
        (48 * 1024, "L1"),  # exactly three quarters of L1, where its plateau window ends too
        (48 * 1024 + 1, "L2"),
        (3 * 2**20, "L2"),
        (3 * 2**20 + 1, None),  # L3 has no bandwidth roof here, so DRAM stays
        (10**10, None),
    ],
)
def test_smallest_level_holding_the_working_set(footprint: int, level: str | None) -> None:
    assert serving_level(footprint, MACHINE) == level


def test_dram_bytes_move_to_the_serving_level_and_other_levels_stay() -> None:
    kernels = [KernelSample("a", {"fp32": 1.0}, {"DRAM": 100.0}, launches=3), KernelSample("b", {}, {"L1": 5.0})]
    placed, note = place_working_set(kernels, 1_000_000, MACHINE)
    assert [k.bytes for k in placed] == [{"L2": 100.0}, {"L1": 5.0}]
    assert placed[0].launches == 3 and placed[0].flops == {"fp32": 1.0}
    assert note is not None and "fits in L2" in note and "1 MB" in note


def test_without_capacities_nothing_moves() -> None:
    bare = Machine("bare", {"fp32": 1.0}, {"DRAM": 1.0})
    kernels = [KernelSample("a", {}, {"DRAM": 8.0})]
    assert place_working_set(kernels, 8, bare) == (kernels, None)


def test_write_allocate_reads_leave_with_an_l1_working_set_only() -> None:
    # a copy of 1,000 fp32: 4,000 read + 4,000 written + 4,000 write-allocate reads of the destination
    kernels = [KernelSample("copy", {}, {"DRAM": 12_000.0})]
    in_l1, note = place_working_set(kernels, 8_000, MACHINE, write_allocate={"copy": 4_000.0})
    assert [k.bytes for k in in_l1] == [{"L1": 8_000.0}]
    assert note is not None and "no write-allocate reads" in note
    in_l2, note = place_working_set(kernels, 1_000_000, MACHINE, write_allocate={"copy": 4_000.0})
    assert [k.bytes for k in in_l2] == [{"L2": 12_000.0}]
    assert note is not None and "write-allocate" not in note
    in_dram, _ = place_working_set(kernels, 10**10, MACHINE, write_allocate={"copy": 4_000.0})
    assert [k.bytes for k in in_dram] == [{"DRAM": 12_000.0}]
