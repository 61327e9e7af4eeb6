"""Live DRAM probes: when a region is probed, how often, and how each call is judged against its probe."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_roofline.measure import probes
from pytest_roofline.measure.regions import _judge_live
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
    verdict, record, note = _judge_live(kernels, m, timing, schedule, cached)
    assert verdict.fraction == pytest.approx(0.8)  # 20 ms / 25 ms: every call reads 0.8 against its live roof
    assert record["fraction_cached_roofs"] == pytest.approx(0.8)
    assert record["live_ratio_median"] == pytest.approx(1.0) and record["probes"] == 3
    assert "live DRAM probe" in note and "0.8" in note
