"""``--roofline-gpu-l2``: which GPU call sites are timed with a flushed L2, the flush's size and place outside the
timed interval, and what the record says. No GPU is needed: torch is a fake that counts the flush's writes."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_roofline.measure.gpu_l2 import L2Flush, torch_flush, wants_flush
from pytest_roofline.measure.regions import Recorder
from pytest_roofline.measure.timing import TimingPolicy, time_callable
from pytest_roofline.model import Machine

MiB = 1 << 20
GPU = Machine("gpu", peak_flops={"fp32": 60e12}, bandwidth={"L2": 7e12, "HBM": 3e12}, info={"device": "cuda:0"})
CPU = Machine("cpu", peak_flops={"fp32": 1e12}, bandwidth={"DRAM": 50e9})
POLICY = TimingPolicy(max_time_s=1e6, min_rounds=3, max_rounds=8, first_batch=4, min_warmup=1, quiet_warmup=1)


@pytest.mark.parametrize(("mode", "cold", "bound", "flushed"), [
    ("auto", True, "", True),  # ncu counts with cold caches
    ("auto", False, "memory:HBM", True),  # main memory's roof binds: its bytes must come from it
    ("auto", False, "memory:L2", False),  # a working set the placement gives to L2 runs warm
    ("auto", False, "compute:fp16_tensor", False),
    ("flush", False, "memory:L2", True),
    ("warm", True, "memory:HBM", False),
])
def test_which_call_sites_are_flushed(mode: str, cold: bool, bound: str, flushed: bool) -> None:
    assert wants_flush(mode, cold, bound, "HBM") is flushed


def test_an_unknown_mode_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'cold' is not one of auto, flush, warm"):
        wants_flush("cold", False, "memory:HBM", "HBM")


class Clock:
    """Virtual seconds: a call costs 1 ms, a flush 1 s; the timed median must hold the call's only."""

    def __init__(self) -> None:
        self.now = 0.0
        self.writes = 0

    def __call__(self) -> float:
        return self.now

    def call(self) -> None:
        self.now += 1e-3

    def flush(self) -> None:
        self.writes += 1
        self.now += 1.0


def test_the_flush_runs_before_every_timed_call_and_outside_its_interval() -> None:
    clock = Clock()
    timing = time_callable(clock.call, policy=POLICY, clock=clock, faults=lambda: (0, 0),
                           before_timed_call=L2Flush(clock.flush, 2 * 50 * MiB))
    assert clock.writes == timing.rounds >= 3  # one per timed call, none in the warm-up
    assert timing.median_s == pytest.approx(1e-3)
    assert timing.max_s == pytest.approx(1e-3)


class FakeTensor:
    def __init__(self, size: int, device: str, writes: list[int]) -> None:
        self.size, self.device, self.writes = size, device, writes

    def zero_(self) -> FakeTensor:
        self.writes.append(self.size)
        return self


def fake_torch(l2_bytes: int, initialized: bool = True) -> tuple[SimpleNamespace, list[FakeTensor], list[int]]:
    made: list[FakeTensor] = []
    writes: list[int] = []

    def empty(size: int, *, dtype: object, device: str) -> FakeTensor:
        made.append(FakeTensor(size, device, writes))
        return made[-1]

    cuda = SimpleNamespace(is_available=lambda: True, is_initialized=lambda: initialized, current_device=lambda: 1,
                           get_device_properties=lambda index: SimpleNamespace(L2_cache_size=l2_bytes),
                           synchronize=lambda: None)
    return SimpleNamespace(cuda=cuda, empty=empty, uint8="uint8"), made, writes


def test_the_flush_writes_twice_the_l2_of_the_current_device_and_is_built_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    torch, made, writes = fake_torch(50 * MiB)
    monkeypatch.setitem(sys.modules, "torch", torch)
    cache: dict[int, L2Flush] = {}
    flush = torch_flush(cache)
    assert flush is not None and torch_flush(cache) is flush
    assert [(t.size, t.device) for t in made] == [(100 * MiB, "cuda:1")]
    assert flush(0.0) is False  # no untimed call after it: evicting the call's data is the point
    assert writes == [100 * MiB]


@pytest.mark.parametrize("torch", [fake_torch(0)[0], fake_torch(50 * MiB, initialized=False)[0]])
def test_no_flush_without_an_l2_size_or_a_cuda_torch(monkeypatch: pytest.MonkeyPatch, torch: object) -> None:
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert torch_flush({}) is None


def measured(monkeypatch: pytest.MonkeyPatch, machine: Machine, mode: str, level: str | None = None,
             device: str = "cuda") -> tuple[dict[str, object], list[int]]:
    torch, _, writes = fake_torch(50 * MiB)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)  # imported by other tests; no GPU to wait for here
    recorder = Recorder(enabled=True, machine=lambda: machine, counter=lambda: pytest.fail("declared only"),
                        policy=POLICY)
    recorder.gpu_l2 = mode
    recorder.declare(flops=1e6, bytes=1e9, level=level, device=device).measure(lambda: None)
    (region,) = recorder.regions
    return dict(region.to_dict()), writes


def test_an_hbm_bound_gpu_call_site_is_timed_flushed_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    record, writes = measured(monkeypatch, GPU, "auto")
    assert record["bound"] == "memory:HBM"
    assert record["gpu_l2"] == "flushed"
    assert len(writes) == record["timing"]["rounds"]  # type: ignore[index]
    assert "GPU L2 flushed before each timed call (--roofline-gpu-l2)" in record["notes"]  # type: ignore[operator]


def test_an_l2_bound_gpu_call_site_is_timed_warm_unless_flush_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    record, writes = measured(monkeypatch, GPU, "auto", level="L2")
    assert (record["bound"], record["gpu_l2"], writes) == ("memory:L2", "warm", [])
    record, writes = measured(monkeypatch, GPU, "flush", level="L2")
    assert record["gpu_l2"] == "flushed" and len(writes) == record["timing"]["rounds"]  # type: ignore[index]


def test_warm_never_flushes_and_a_cpu_call_site_has_no_l2_field(monkeypatch: pytest.MonkeyPatch) -> None:
    record, writes = measured(monkeypatch, GPU, "warm")
    assert (record["gpu_l2"], writes) == ("warm", [])
    record, writes = measured(monkeypatch, CPU, "flush", device="cpu")
    assert "gpu_l2" not in record and writes == []


def test_a_bad_value_names_the_option_and_a_cpu_session_records_no_l2(
        pytester: pytest.Pytester, machine_file: Path, run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile("""
import time, pytest

@pytest.mark.roofline
def test_x(roofline):
    roofline.declare(bytes=1e6).measure(time.sleep, 1e-3)  # 0.1 ms at the pinned 10 GB/s: a fraction <= 0.1
""")
    result = run_roofline(machine_file, "--roofline-gpu-l2", "cold")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--roofline-gpu-l2 must be one of auto, flush, warm*"])
    run_roofline(machine_file, "--roofline-gpu-l2", "flush", "--roofline-max-time", "0.05").assert_outcomes(passed=1)
    (region,) = json.loads((pytester.path / ".roofline" / "results.json").read_text())["tests"][0]["regions"]
    assert "gpu_l2" not in region
