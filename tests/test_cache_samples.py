"""Cache-level samples spread over the characterization join their window's sweep points."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_roofline.characterize import cache_samples, plateaus
from pytest_roofline.characterize.cpu_ert import SweepPoint

KiB = 1024


def point(size: int, bandwidth: float, quiet: bool = True) -> SweepPoint:
    # 2 x size bytes per trial: one trial in 2 x size / bandwidth seconds reads ``bandwidth``
    return SweepPoint("fp64", 512, 1, size, 1, 2 * size / bandwidth, quiet=quiet)


def test_each_cache_level_samples_the_sweep_size_nearest_its_windows_geometric_middle() -> None:
    sizes = [8 * KiB, 16 * KiB, 32 * KiB, 64 * KiB, 128 * KiB, 256 * KiB, 512 * KiB, 1024 * KiB]
    windows = {"L1": (8 * KiB, 72 * KiB), "L2": (120 * KiB, 1536 * KiB), "DRAM": (128 * 2**20, 256 * 2**20)}
    # sqrt(8 x 72) = 24 KiB: 32 is 1.33x above it, 16 1.5x below; sqrt(120 x 1536) = 429 KiB: 512 is 1.19x above
    assert cache_samples.sample_sizes(sizes, windows) == {"L1": 32 * KiB, "L2": 512 * KiB}
    assert cache_samples.sample_sizes([4 * KiB], windows) == {}  # no sweep size inside any window


def test_samples_of_a_fast_mode_set_the_plateau_that_the_sweep_missed() -> None:
    rates = iter([480e9, 330e9, 478e9, 476e9])  # moments in the fast and the slow mode of a shared core

    sampler = cache_samples.CacheSampler(lambda size: point(size, next(rates)), {"L1": 16 * KiB})
    for _ in range(4):
        sampler.take()
    sweep = [point(s * KiB, 335e9) for s in (8, 12, 16, 24, 32)]  # the sweep passed in a slow mode
    found = plateaus.extract_plateaus([p.working_set_bytes for p in sweep + sampler.points()],
                                      [p.bandwidth for p in sweep + sampler.points()], {"L1": (8 * KiB, 72 * KiB)})
    assert found["L1"].bytes_per_s == pytest.approx(480e9) and found["L1"].points == 3  # 480, 478, 476: 5 %
    info = sampler.to_info("L1")
    assert info is not None and info["working_set_bytes"] == 16 * KiB and info["disturbed"] == 0
    assert info["bytes_per_s"] == pytest.approx([480e9, 330e9, 478e9, 476e9])
    assert sampler.to_info("L2") is None


def test_a_disturbed_moment_marks_its_samples_not_quiet() -> None:
    class Guard:
        def run(self, body: Any) -> tuple[Any, str | None]:
            return body(), "other processes used 40% of the cores measured on"

    sampler = cache_samples.CacheSampler(lambda size: point(size, 500e9), {"L1": 16 * KiB, "L2": 512 * KiB},
                                         guard=Guard())  # type: ignore[arg-type]
    sampler.take()
    assert [p.quiet for p in sampler.points()] == [False, False]
    assert sampler.moments_disturbed == ["other processes used 40% of the cores measured on"]
    info = sampler.to_info("L2")
    assert info is not None and info["disturbed"] == 1 and info["bytes_per_s"] == pytest.approx([500e9])


def test_a_library_copy_beyond_the_nearest_level_checks_the_roof_from_outside() -> None:
    """A copy of N bytes is counted 3N beyond L1 (the write-allocate read), as the analytic counter counts it:
    timed at 200 GB/s (2 words) it reads 300 GB/s; the best of COPY_CALLS per moment, the median of moments."""
    timed = iter([150e9, 200e9, 190e9,  100e9, 180e9, 170e9,  210e9, 205e9, None])  # 3 moments x 3 calls
    sizes: list[int] = []

    def copy(size: int) -> float | None:
        sizes.append(size)
        return next(timed)

    sampler = cache_samples.CacheSampler(lambda size: point(size, 500e9), {"L1": 16 * KiB, "L2": 512 * KiB},
                                         copy=copy, copy_levels=("L2",), copy_source="torch-copy")
    for _ in range(3):
        sampler.take()
    assert sizes == [512 * KiB] * 9  # never at L1: stores hit there, so a copy is not counted 3 words
    assert sampler.copies["L2"] == pytest.approx([300e9, 270e9, 315e9])  # 1.5 x the best of each moment
    assert sampler.copy_roof("L2") == pytest.approx(300e9)
    assert sampler.beats("L2", 280e9) == pytest.approx(300e9)  # 7 % above: that roof is low
    assert sampler.beats("L2", 290e9) is None  # 3.4 % above: within BEAT_MARGIN, timing noise
    assert sampler.beats("L1", 1.0) is None  # no copy there
    info = sampler.to_info("L2")
    assert info is not None and info["copy_source"] == "torch-copy"
    assert info["copy_median_bytes_per_s"] == pytest.approx(300e9)
    assert "copy_source" not in (sampler.to_info("L1") or {})


def test_a_disturbed_moment_keeps_no_copy() -> None:
    class Guard:
        def run(self, body: Any) -> tuple[Any, str | None]:
            return body(), "other processes used 40% of the cores measured on"

    sampler = cache_samples.CacheSampler(lambda size: point(size, 500e9), {"L2": 512 * KiB},
                                         guard=Guard(), copy=lambda size: 900e9,  # type: ignore[arg-type]
                                         copy_levels=("L2",))
    sampler.take()
    assert sampler.copies == {} and sampler.copy_roof("L2") is None and sampler.beats("L2", 1e9) is None
