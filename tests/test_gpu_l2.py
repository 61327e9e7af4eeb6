"""``--roofline-gpu-l2``: which GPU call sites are timed with a flushed L2, the flush's size and place outside the
timed interval, and what the record says. No GPU is needed: torch is a fake that counts the flush's writes."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import TypeVar

import pytest

from pytest_roofline.counters import CounterBase
from pytest_roofline.history.baseline import Environment, same_environment
from pytest_roofline.measure.gpu_l2 import L2Flush, torch_flush, wants_flush
from pytest_roofline.measure.regions import Recorder
from pytest_roofline.measure.timing import TimingPolicy, time_callable
from pytest_roofline.model import KernelSample, Machine
from pytest_roofline.record.tests import gpu_l2_of

T = TypeVar("T")
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
                           flush=clock.flush)
    assert clock.writes == timing.rounds >= 3  # one per timed call, none in the warm-up
    assert timing.median_s == pytest.approx(1e-3)
    assert timing.max_s == pytest.approx(1e-3)


def test_the_flush_comes_after_the_setup_so_the_setup_cannot_warm_the_call() -> None:
    order: list[str] = []

    def setup() -> None:
        order.append("setup")

    timing = time_callable(lambda: order.append("call"), policy=POLICY, faults=lambda: (0, 0), setup=setup,
                           flush=lambda: order.append("flush"))
    timed = order[order.index("flush") - 1:]  # from the first timed call's setup on
    assert timed == ["setup", "flush", "call"] * timing.rounds


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

    cuda = SimpleNamespace(is_available=lambda: True, is_initialized=lambda: initialized, device_count=lambda: 2,
                           get_device_properties=lambda index: SimpleNamespace(L2_cache_size=l2_bytes),
                           synchronize=lambda: None)
    return SimpleNamespace(cuda=cuda, empty=empty, uint8="uint8"), made, writes


def test_the_flush_writes_twice_the_l2_of_the_current_device_and_is_built_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    torch, made, writes = fake_torch(50 * MiB)
    monkeypatch.setitem(sys.modules, "torch", torch)
    cache: dict[int, L2Flush] = {}
    flush = torch_flush(cache, 1)
    assert flush is not None and torch_flush(cache, 1) is flush
    assert [(t.size, t.device) for t in made] == [(100 * MiB, "cuda:1")]
    flush()
    assert writes == [100 * MiB]
    assert torch_flush(cache, 2) is None  # no such device


@pytest.mark.parametrize("torch", [fake_torch(0)[0], fake_torch(50 * MiB, initialized=False)[0]])
def test_no_flush_without_an_l2_size_or_a_cuda_torch(monkeypatch: pytest.MonkeyPatch, torch: object) -> None:
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert torch_flush({}, 0) is None


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


class OnGpu(CounterBase):
    """Saw one kernel move 1 MiB at HBM from a 1 MiB working set (which fits the L2), on the GPU."""

    name = "fake"
    device = "cuda"
    footprint_bytes = float(MiB)

    def __init__(self, deferred: bool = False) -> None:
        self.deferred = deferred

    def count(self, fn: Callable[..., T], args: tuple[object, ...],
              kwargs: Mapping[str, object]) -> tuple[T, list[KernelSample]]:
        return fn(*args, **kwargs), [KernelSample("k", {"fp32": 1e3}, {"HBM": float(MiB)})]


GPU_L2 = Machine("gpu", peak_flops={"fp32": 60e12}, bandwidth={"L2": 7e12, "HBM": 3e12},
                 info={"device": "cuda:0", "l2_bytes": 50 * MiB})


def recorder_on_gpu(monkeypatch: pytest.MonkeyPatch, mode: str, counter: OnGpu) -> tuple[Recorder, list[int]]:
    torch, _, writes = fake_torch(50 * MiB)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    recorder = Recorder(enabled=True, machine=lambda: GPU_L2, counter=lambda: counter, policy=POLICY)
    recorder.gpu_l2 = mode
    return recorder, writes


def test_a_working_set_in_l2_is_judged_there_warm_and_at_hbm_when_flushed(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder, writes = recorder_on_gpu(monkeypatch, "auto", OnGpu())
    recorder.measure(lambda: None)
    warm = recorder.regions[-1].to_dict()
    assert (warm.get("gpu_l2"), warm["bytes"], writes) == ("warm", {"L2": float(MiB)}, [])
    recorder, writes = recorder_on_gpu(monkeypatch, "flush", OnGpu())
    recorder.measure(lambda: None)
    flushed = recorder.regions[-1].to_dict()
    # the flush evicted what the placement would give to L2: the bytes stay at HBM, as counted
    assert (flushed.get("gpu_l2"), flushed["bytes"]) == ("flushed", {"HBM": float(MiB)})
    first = len(writes)
    assert first == flushed["timing"]["rounds"]
    assert recorder.confirm()  # timed again the same way: flushed before each of its timed calls too
    assert len(writes) >= first + POLICY.min_rounds
    assert recorder.regions[-1].gpu_l2 == "flushed" and recorder.regions[-1].confirmed is not None


def test_ncu_call_sites_are_timed_flushed_and_stay_so_when_counted_by_another_counter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    recorder, writes = recorder_on_gpu(monkeypatch, "auto", OnGpu(deferred=True))
    recorder.measure(lambda: None)
    (pending,) = recorder.pending
    assert pending.l2.state == "flushed" and len(writes) == pending.timing.rounds
    recorder.count_pending(OnGpu(), note="ncu unavailable")
    record = recorder.regions[-1].to_dict()
    assert (record.get("gpu_l2"), record["bytes"]) == ("flushed", {"HBM": float(MiB)})  # not placed in L2


@pytest.mark.parametrize(("regions", "state"), [
    ([{"device": "cpu"}], None),
    ([{"device": "cuda"}], "warm"),  # recorded before the setting: timed warm
    ([{"device": "cuda", "gpu_l2": "flushed"}], "flushed"),
    ([{"device": "cuda", "gpu_l2": "flushed"}, {"device": "cuda", "gpu_l2": "warm"}], "flushed+warm"),
])
def test_a_tests_l2_state_from_its_regions(regions: list[dict[str, str]], state: str | None) -> None:
    assert gpu_l2_of(regions) == state


def test_a_baseline_timed_warm_is_not_compared_with_a_flushed_measurement() -> None:
    now = Environment(torch="2.13", threads=None, gpu_l2="flushed")
    assert not same_environment(Environment(torch="2.13", threads=None, gpu_l2="warm"), now)
    assert same_environment(Environment(torch="2.13", threads=None, gpu_l2="flushed"), now)
    assert same_environment(Environment(torch="2.13", threads=None, gpu_l2=None), Environment(torch="2.13"))
