"""Live DRAM probes: when a region is probed, how often, and how each call is judged against its probe."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_roofline.measure import probes
from pytest_roofline.measure.device_roofs import judge_live
from pytest_roofline.measure.timing import summarize
from pytest_roofline.model import KernelSample, Machine, evaluate_region

MiB = 2**20


def machine(tmp_path: Path, dram: float = 50e9) -> Machine:
    library = tmp_path / "ert.so"
    library.write_bytes(b"")
    return Machine("hand", {"fp32": 100e9}, {"L3": 200e9, "DRAM": dram}, info={
        "capacities": {"L1": 32 * 1024, "L3": 32 * MiB},
        "kernel": {"libraries": {"512": str(library)}, "threads": 1, "chains": 16},
        "levels": {"DRAM": {"plateau_bytes": [128 * MiB, 256 * MiB]}},
        "sweep": {"update": [{"working_set_bytes": 64 * MiB, "bytes_per_s": 70e9},
                             {"working_set_bytes": 128 * MiB, "bytes_per_s": 48e9},
                             {"working_set_bytes": 256 * MiB, "bytes_per_s": 50e9}]},
    })


def test_the_probe_is_the_smallest_plateau_size_calibrated_by_its_sweep_point(tmp_path: Path) -> None:
    spec = probes.ProbeSpec.from_machine(machine(tmp_path))
    assert spec is not None
    assert (spec.working_set_bytes, spec.calibration_bytes_per_s, spec.roof_bytes_per_s) == (128 * MiB, 48e9, 50e9)
    live = probes.live_machine(machine(tmp_path), spec, 36e9)  # memory at 0.75 of the calibration
    assert live.bandwidth["DRAM"] == pytest.approx(37.5e9) and live.bandwidth["L3"] == 200e9


def test_a_sampled_dram_roof_calibrates_the_probe_by_its_samples(tmp_path: Path) -> None:
    m = machine(tmp_path, dram=56e9)
    m.info["levels"]["DRAM"]["samples"] = {"working_set_bytes": 192 * MiB, "update_bytes_per_s": 56e9}
    spec = probes.ProbeSpec.from_machine(m)
    assert spec is not None
    assert (spec.working_set_bytes, spec.calibration_bytes_per_s, spec.roof_bytes_per_s) == (192 * MiB, 56e9, 56e9)
    assert probes.live_machine(m, spec, 42e9).bandwidth["DRAM"] == pytest.approx(42e9)  # the probe's rate itself


def test_no_probe_without_the_characterization_kernel(tmp_path: Path) -> None:
    pinned = Machine("pinned", {"fp32": 1e9}, {"DRAM": 1e9})
    assert probes.ProbeSpec.from_machine(pinned) is None
    gone = machine(tmp_path)
    (tmp_path / "ert.so").unlink()  # the cache's build folder was deleted since
    assert probes.ProbeSpec.from_machine(gone) is None


def test_only_working_sets_that_cannot_stay_in_cache_are_probed(tmp_path: Path) -> None:
    m = machine(tmp_path)
    assert probes.wants_probe(64 * MiB, m, dram_bytes=1.0)      # twice the 32 MiB L3
    assert not probes.wants_probe(63 * MiB, m, dram_bytes=1.0)  # could still hit in L3 between calls
    assert not probes.wants_probe(64 * MiB, m, dram_bytes=0.0)  # bytes judged at a cache level
    assert not probes.wants_probe(None, m, dram_bytes=1.0)      # declared counts: no working set known


class FakeProbe:
    def __init__(self, spec: probes.ProbeSpec, rates: list[float], seconds: float) -> None:
        self.spec, self._rates, self.seconds, self.now = spec, iter(rates), seconds, 0.0

    def rate(self) -> float:
        self.now += self.seconds
        return next(self._rates)


def test_probes_cost_at_most_the_calls_own_time(tmp_path: Path) -> None:
    spec = probes.ProbeSpec.from_machine(machine(tmp_path))
    assert spec is not None
    fake = FakeProbe(spec, [48e9, 24e9, 36e9, 48e9], seconds=0.005)
    schedule = probes.ProbeSchedule(fake, clock=lambda: fake.now)  # type: ignore[arg-type]
    for previous in [0.0, 0.002, 0.002, 0.002, 0.002, 0.002]:  # 2 ms calls, 5 ms probes
        schedule(previous)
    # a probe before the first call, then one each time the calls since the last one took >= 5 ms
    assert schedule.probes == [48e9, 24e9]
    assert schedule.rates == [48e9, 48e9, 48e9, 24e9, 24e9, 24e9]
    assert schedule.probe_seconds == pytest.approx(0.010)


def test_each_call_is_judged_against_its_probe(tmp_path: Path) -> None:
    m = machine(tmp_path)
    spec = probes.ProbeSpec.from_machine(m)
    assert spec is not None
    fake = FakeProbe(spec, [48e9, 24e9, 48e9], seconds=0.0)
    schedule = probes.ProbeSchedule(fake, clock=lambda: fake.now)  # type: ignore[arg-type]
    for _ in range(3):
        schedule(1.0)  # every call long enough to earn a probe
    # 1 GB at DRAM: 20 ms at the 50 GB/s roof. The second call took twice as long while memory gave half.
    kernels = [KernelSample("copy", {}, {"DRAM": 1e9})]
    timing = summarize([0.025, 0.050, 0.025])
    cached = evaluate_region(kernels, m, 0.025)
    verdict, record, note = judge_live(kernels, m, timing, schedule, cached)
    assert verdict.fraction == pytest.approx(0.8)  # 20 ms / 25 ms: every call reads 0.8 against its live roof
    assert record["fraction_cached_roofs"] == pytest.approx(0.8)
    assert record["live_ratio_median"] == pytest.approx(1.0) and record["probes"] == 3
    assert "live DRAM probe" in note and "0.8" in note


def edge_machine(tmp_path: Path) -> Machine:
    """32 MiB last cache after a 1 MiB L2; sweep points 16, 24 and 32 MiB."""
    m = machine(tmp_path)
    info = {**m.info, "capacities": {"L1": 32 * 1024, "L2": MiB, "L3": 32 * MiB},
            "sweep": {"update": [{"working_set_bytes": 16 * MiB, "bytes_per_s": 90e9},
                                 {"working_set_bytes": 24 * MiB, "bytes_per_s": 60e9},
                                 {"working_set_bytes": 32 * MiB, "bytes_per_s": 40e9}]}}
    return Machine(m.name, m.peak_flops, m.bandwidth, info=info)


def test_a_working_set_at_the_edge_of_the_last_cache_is_probed_at_its_own_size(tmp_path: Path) -> None:
    m = edge_machine(tmp_path)
    # 3 x 8 MiB (an add with a fresh output) is nearest the 24 MiB sweep point, judged at L3
    assert probes.wants_footprint_probe(24 * MiB, m, {"L3": 1.0}) == "L3"
    spec = probes.ProbeSpec.at_footprint(m, "L3", 25 * MiB)
    assert spec is not None
    assert (spec.working_set_bytes, spec.calibration_bytes_per_s, spec.roof_bytes_per_s) == (24 * MiB, 60e9, 200e9)
    assert spec.level == "L3" and spec.rewarm
    live = probes.live_machine(m, spec, 45e9)  # the memory system at this size gives 0.75 of its calibration
    assert live.bandwidth["L3"] == pytest.approx(150e9) and live.bandwidth["DRAM"] == 50e9


def test_only_last_cache_working_sets_get_a_footprint_probe(tmp_path: Path) -> None:
    m = edge_machine(tmp_path)
    assert probes.wants_footprint_probe(MiB // 2, m, {"L3": 1.0}) is None  # fits in L2: stable roofs, no probe
    assert probes.wants_footprint_probe(64 * MiB, m, {"DRAM": 1.0}) is None  # the DRAM probe's business
    assert probes.wants_footprint_probe(40 * MiB, m, {"DRAM": 1.0}) == "DRAM"  # spills past L3, under 2x
    assert probes.wants_footprint_probe(24 * MiB, m, {"L3": 1.0, "DRAM": 1.0}) is None  # two levels: ambiguous
    assert probes.wants_footprint_probe(None, m, {"L3": 1.0}) is None


def test_a_probe_that_evicts_the_data_asks_for_a_rewarm_and_pays_for_it(tmp_path: Path) -> None:
    spec = probes.ProbeSpec.at_footprint(edge_machine(tmp_path), "L3", 24 * MiB)
    assert spec is not None
    fake = FakeProbe(spec, [60e9, 30e9, 30e9], seconds=0.002)
    schedule = probes.ProbeSchedule(fake, clock=lambda: fake.now)  # type: ignore[arg-type]
    # 2 ms probes and 1 ms calls. The first probe's rewarm cost is unknown (no call timed yet): 2 ms, so the
    # second probe comes after 2 ms of calls; it costs 2 ms + the 1 ms untimed call, so the next waits for 3 ms.
    asked = [schedule(previous) for previous in [0.0, 0.001, 0.001, 0.001, 0.001, 0.001]]
    assert asked == [True, False, True, False, False, True]
    assert schedule.rates == [60e9, 60e9, 30e9, 30e9, 30e9, 30e9]
    assert schedule.probe_seconds == pytest.approx(0.002 + 0.003 + 0.003)
