"""Plateau extraction on synthetic sweeps whose answers are worked out by hand."""

from __future__ import annotations

import pytest

from pytest_roofline.characterize import plateaus

KiB, MiB = 1024, 1024**2


def test_aggregate_capacities_add_private_caches_only() -> None:
    sizes = {1: 48 * KiB, 2: 2 * MiB, 3: 105 * MiB}
    sharing = {1: 1, 2: 1, 3: 2}
    assert plateaus.aggregate_capacities(sizes, sharing, threads=2) == {1: 96 * KiB, 2: 4 * MiB, 3: 105 * MiB}
    assert plateaus.aggregate_capacities(sizes, sharing, threads=1) == {1: 48 * KiB, 2: 2 * MiB, 3: 105 * MiB}
    # 4 threads on a cache shared by 2 CPUs: two instances.
    assert plateaus.aggregate_capacities({2: MiB}, {2: 2}, threads=4) == {2: 2 * MiB}


def test_level_windows_by_hand() -> None:
    windows = plateaus.level_windows({1: 64 * KiB, 2: 4 * MiB, 3: 32 * MiB}, 8 * KiB, 512 * MiB)
    assert windows == {
        "L1": (8 * KiB, 48 * KiB),                  # smallest .. 0.75 x 64 KiB
        "L2": (80 * KiB, 3 * MiB),                  # 1.25 x 64 KiB .. 0.75 x 4 MiB
        "L3": (5 * MiB, 24 * MiB),                  # 1.25 x 4 MiB .. 0.75 x 32 MiB
        "DRAM": (128 * MiB, 512 * MiB),             # 4 x 32 MiB .. largest
    }


def test_level_windows_drop_levels_the_sweep_cannot_reach() -> None:
    windows = plateaus.level_windows({1: 64 * KiB, 2: 4 * MiB}, 8 * KiB, 6 * MiB, main_memory="HBM")
    assert list(windows) == ["L1", "L2"]  # HBM starts at 8 MiB, beyond the largest working set


def test_top_cluster_ignores_a_lone_spike_and_a_falling_tail() -> None:
    values = [100.0, 70.0, 71.0, 69.0, 70.5, 55.0, 40.0, 33.0]
    value, members = plateaus.top_cluster(values)
    # 100 has no company within 5 %; 71 has 70, 69 and 70.5 (>= 67.45) -> 71 is the plateau.
    assert (value, members) == (71.0, [1, 2, 3, 4])


def test_top_cluster_with_few_values_needs_half_of_them() -> None:
    assert plateaus.top_cluster([10.0]) == (10.0, [0])
    assert plateaus.top_cluster([30.0, 20.0, 19.5]) == (20.0, [1, 2])  # 2 of 3 must agree
    assert plateaus.top_cluster([30.0, 20.0, 19.5], support=3) == (20.0, [1, 2])  # no three agree: a pair


def test_without_three_agreeing_points_a_lone_fastest_one_never_sets_the_roof() -> None:
    seen = [287.0, 550.0, 483.0, 485.0, 341.0, 345.0, 370.0, 391.0, 404.0]  # a triad L1 window, GB/s
    assert plateaus.top_cluster(seen) == (485.0, [2, 3])  # was 550, alone
    assert plateaus.top_cluster([300.0, 200.0, 100.0], support=3) == (200.0, [1])  # no pair agrees: the median
    assert plateaus.top_cluster([400.0, 100.0], support=2) == (100.0, [1])  # the lower median of two


def test_extract_plateaus_on_a_synthetic_staircase() -> None:
    # A 3-level machine: ~400 GB/s to 32 KiB, ~150 to 2 MiB, ~60 to 16 MiB (usable L3 smaller than the
    # nominal 32 MiB, as on a VM), then ~20 GB/s; the transitions are sloped and one L2 point spikes.
    sweep = {
        8 * KiB: 400e9, 16 * KiB: 410e9, 24 * KiB: 395e9, 32 * KiB: 390e9, 48 * KiB: 250e9,
        96 * KiB: 152e9, 256 * KiB: 150e9, 512 * KiB: 300e9, 1 * MiB: 148e9, 2 * MiB: 149e9, 3 * MiB: 120e9,
        6 * MiB: 61e9, 8 * MiB: 60e9, 12 * MiB: 59e9, 16 * MiB: 58e9, 20 * MiB: 40e9,
        64 * MiB: 21e9, 128 * MiB: 20e9, 192 * MiB: 19.6e9, 256 * MiB: 19.5e9,
    }
    windows = plateaus.level_windows({1: 48 * KiB, 2: 4 * MiB, 3: 32 * MiB}, 8 * KiB, 256 * MiB)
    found = plateaus.extract_plateaus(list(sweep), list(sweep.values()), windows)
    assert set(found) == {"L1", "L2", "L3", "DRAM"}
    # L1 window 8..36 KiB: 4 points, 2 must agree; 410 has all four within 5 % (>= 389.5).
    assert (found["L1"].bytes_per_s, found["L1"].points) == (410e9, 4)
    # L2 window 60 KiB..3 MiB: the 300 spike stands alone; 152 has 150, 148, 149 (>= 144.4).
    assert (found["L2"].bytes_per_s, found["L2"].points) == (152e9, 4)
    # L3 window 5..24 MiB: 61 has 60, 59, 58 (>= 57.95); the falling 40 is left out.
    assert (found["L3"].bytes_per_s, found["L3"].first_bytes, found["L3"].last_bytes) == (61e9, 6 * MiB, 16 * MiB)
    # DRAM window 128..256 MiB (64 MiB may still hit in L3): 3 points, 2 must agree; 20 has all three.
    assert (found["DRAM"].bytes_per_s, found["DRAM"].points) == (20e9, 3)


def test_extract_plateaus_rejects_mismatched_inputs() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        plateaus.extract_plateaus([1, 2], [1.0], {"L1": (0, 10)})


def test_triad_plateaus_beyond_l1_count_the_write_allocate_read() -> None:
    from pytest_roofline.characterize.plateaus import Plateau, with_write_allocate

    found = {level: Plateau(level, 300e9, (1.0, 2.0), 3, 1, 2) for level in ("L1", "L2", "DRAM")}
    counted = with_write_allocate(found)
    assert counted["L1"].bytes_per_s == 300e9             # stores hit in L1: 3 words as measured
    assert counted["L2"].bytes_per_s == pytest.approx(400e9)  # 4 words: the written line is read first
    assert counted["DRAM"].bytes_per_s == pytest.approx(400e9)
