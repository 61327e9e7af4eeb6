"""The DRAM roof as the median of samples spread over the characterization, at one working set."""

from __future__ import annotations

import pytest

from pytest_roofline.characterize import dram_samples
from pytest_roofline.characterize.plateaus import WRITE_ALLOCATE_FACTOR

MiB = 2**20


class FakeRates:
    """Hands out the given rates in order and records the working sets asked for."""

    copy_source = "torch-copy"

    def __init__(self, update: list[float | None], triad: list[float | None],
                 scale: list[float | None] | None = None, copy: list[float | None] | None = None) -> None:
        self._update, self._triad = iter(update), iter(triad)
        self._scale = iter(scale if scale is not None else [None] * len(update))
        self._copy = iter(copy if copy is not None else [None] * len(update))
        self.sizes: list[int] = []

    def update_rate(self, working_set_bytes: int) -> float | None:
        self.sizes.append(working_set_bytes)
        return next(self._update)

    def triad_rate(self, working_set_bytes: int) -> float | None:
        self.sizes.append(working_set_bytes)
        return next(self._triad)

    def scale_rate(self, working_set_bytes: int) -> float | None:
        self.sizes.append(working_set_bytes)
        return next(self._scale)

    def copy_rate(self, working_set_bytes: int) -> float | None:
        self.sizes.append(working_set_bytes)
        return next(self._copy)


def test_the_sample_size_is_the_window_size_nearest_six_times_the_last_cache() -> None:
    sizes = [128 * MiB, 152 * MiB, 181 * MiB, 215 * MiB, 256 * MiB]  # 4x .. 8x a 32 MiB L3, 1.19x apart
    window = (128 * MiB, 256 * MiB)
    # 6 x 32 MiB = 192 MiB: 181 MiB is 1.06x below it, 215 MiB 1.12x above
    assert dram_samples.sample_size(sizes, window, 32 * MiB, MiB) == 181 * MiB
    assert dram_samples.sample_size(sizes, window, 32 * MiB, 7 * MiB) == 175 * MiB  # rounded down to the triad's
    assert dram_samples.sample_size(sizes, None, 32 * MiB, 1024) is None  # the sweep never reached DRAM
    assert dram_samples.sample_size([64 * MiB], window, 32 * MiB, 1024) is None  # no sweep size in the window
    assert dram_samples.sample_size(sizes, window, 32 * MiB, 100 * MiB) is None  # rounding left the window


def test_the_roof_is_the_median_of_the_faster_kernel() -> None:
    rates = FakeRates(update=[50e9, 58e9, 30e9, 56e9, 57e9], triad=[39e9, 45e9, 42e9, 20e9, 41e9])
    sampler = dram_samples.DramSampler(rates, 192 * MiB)
    sampler.take(2)
    sampler.take(3)
    assert rates.sizes == [192 * MiB] * 20  # 5 passes of each of the 4 kernels
    assert sampler.update_roof() == 56e9  # median of 30, 50, 56, 57, 58: the slow 30 and fast 58 set nothing
    assert sampler.triad_roof() == pytest.approx(41e9 * WRITE_ALLOCATE_FACTOR)  # 54.7e9, write-allocate read
    assert sampler.roof() == (56e9, "ert-update")
    info = sampler.to_info()
    assert info["working_set_bytes"] == 192 * MiB and info["update_samples"] == [50e9, 58e9, 30e9, 56e9, 57e9]


def test_a_triad_faster_with_its_write_allocate_read_sets_the_roof() -> None:
    sampler = dram_samples.DramSampler(FakeRates(update=[40e9, 42e9], triad=[36e9, 36e9]), 192 * MiB)
    sampler.take(2)
    assert sampler.roof() == (pytest.approx(48e9), "ert-triad")  # 36 x 4/3 = 48 > median 41


def test_a_scale_faster_with_its_write_allocate_read_sets_the_roof() -> None:
    # b = s*a times 2 words per element; the counter charges a copy 3 (the write-allocate read of b)
    sampler = dram_samples.DramSampler(FakeRates(update=[40e9, 42e9, 41e9], triad=[30e9, 30e9, 30e9],
                                                 scale=[29e9, 30e9, 31e9]), 192 * MiB)
    sampler.take(3)
    assert sampler.scale_roof() == pytest.approx(45e9)  # median 30 x 3/2 > update 41 > triad 40
    assert sampler.roof() == (pytest.approx(45e9), "ert-scale")
    assert sampler.to_info()["scale_samples"] == [29e9, 30e9, 31e9]


def test_disturbed_passes_are_left_out() -> None:
    sampler = dram_samples.DramSampler(FakeRates(update=[50e9, None, 52e9], triad=[None, None, 30e9]), 192 * MiB)
    sampler.take(3)
    assert sampler.update == [50e9, 52e9] and sampler.triad == [30e9] and sampler.disturbed == 9  # 3 scale, 3 copy
    assert sampler.update_roof() == 51e9


def test_no_samples_no_roof() -> None:
    sampler = dram_samples.DramSampler(FakeRates([], []), 192 * MiB)
    assert sampler.roof() is None and sampler.update_roof() is None


def test_a_library_copy_faster_than_every_kernel_sets_the_roof_and_names_its_library() -> None:
    """A memcpy with non-temporal stores moves 2 words where the counter charges 3: counted so, at 40 GB/s as
    timed it reads 60 GB/s, above the update's 50, and a copy's fraction must stay at or under 1."""
    rates = FakeRates(update=[50e9] * 3, triad=[30e9] * 3, scale=[32e9] * 3, copy=[40e9, 41e9, 39e9])
    sampler = dram_samples.DramSampler(rates, 192 * MiB)
    sampler.take(3)
    assert sampler.kernel_roof("copy") == pytest.approx(40e9 * 1.5)
    assert sampler.roof() == (pytest.approx(60e9), "torch-copy")
    info = sampler.to_info()
    assert info["copy_samples"] == [40e9, 41e9, 39e9] and info["copy_source"] == "torch-copy"
