"""The live HBM probe on CUDA, offline: its kernel through NVRTC and its PTX; its host logic with a fake CuPy.

Nothing here needs a GPU except the last test, which skips without one (no GPU was available where this was
written, so that test has never run).
"""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest

from pytest_roofline.characterize import cuda_ert
from pytest_roofline.counters import CounterBase
from pytest_roofline.measure import cuda_probe, probes
from pytest_roofline.measure.device_roofs import judge_live
from pytest_roofline.measure.regions import Recorder
from pytest_roofline.measure.timing import TimingPolicy, summarize
from pytest_roofline.model import KernelSample, Machine, evaluate_region

MiB = 2**20


needs_nvrtc = pytest.mark.usefixtures("nvrtc")  # skips, with the reason, without NVRTC


def row(size_mib: int, bytes_per_s: float, trials: int = 4, precision: str = "fp64", flops: int = 1) -> dict[str, Any]:
    return {"precision": precision, "flops_per_element": flops, "working_set_bytes": size_mib * MiB,
            "trials": trials, "seconds": 0.002, "blocks": 1056, "threads_per_block": 256, "bytes_per_s": bytes_per_s}


def gpu(plateau_mib: tuple[int, int] = (256, 1024), l2_mib: int = 50, hbm: float = 3.0e12,
        rows: list[dict[str, Any]] | None = None) -> Machine:
    """An H100-like record as characterize/cuda.py writes it (numbers made up for the arithmetic)."""
    return Machine("gpu", {"fp64": 60e12}, {"L2": 10e12, "HBM": hbm}, info={
        "method": "ert-cuda", "device": "cuda:1", "fingerprint": {"device": "cuda:1", "l2_bytes": l2_mib * MiB},
        "levels": {"HBM": {"window_bytes": [4 * l2_mib * MiB, 2048 * MiB],
                           "plateau_bytes": [plateau_mib[0] * MiB, plateau_mib[1] * MiB]}},
        "sweep": {"update": rows if rows is not None else [
            row(128, 3.2e12), row(256, 2.8e12, trials=8), row(512, 2.9e12), row(1024, 3.0e12),
            row(256, 1e12, precision="fp32", flops=64)]},
    })


# --- the kernel, offline ----------------------------------------------------------------------------------

def _skip_unbuildable(arch: int) -> None:
    """Skip, with the reason, a target the installed NVRTC cannot build (CUDA 13 dropped sm_70)."""
    reason = cuda_ert.unbuildable_reason(arch)
    if reason is not None:
        pytest.skip(reason)


@needs_nvrtc
@pytest.mark.parametrize("arch", cuda_ert.ARCHITECTURES)
def test_probe_kernel_streams_one_load_and_one_store_per_element(arch: int) -> None:
    _skip_unbuildable(arch)
    body = cuda_probe.probe_ptx(arch)
    assert len(re.findall(r"\bld\.global\.f64\b", body)) == 1  # 8 bytes read per element
    assert len(re.findall(r"\bst\.global\.f64\b", body)) == 1  # 8 bytes written back
    assert len(re.findall(r"\b(?:ld|st)\.global\b", body)) == 2  # nothing else touches memory
    # One multiply by 1.0 per element, nothing else in floating point: 1 FLOP per 16 bytes, far below every GPU's
    # ridge (V100's fp64 ridge is about 7.8 TFLOP/s / 900 GB/s = 8.7 FLOP/byte), so HBM binds it.
    floating = re.findall(r"\b(?:fma|mad|mul|add|sub|div|rcp|sqrt|neg|min|max)(?:\.\w+)*"
                          r"\.(?:f16x2|bf16x2|f16|bf16|f32|f64)\b", body)
    assert floating == ["mul.f64"]


@needs_nvrtc
@pytest.mark.parametrize("arch", cuda_ert.ARCHITECTURES)
def test_probe_kernel_parameters_match_what_the_host_passes(arch: int) -> None:
    _skip_unbuildable(arch)
    ptx = str(cuda_ert.compile_kernels(cuda_probe.PRECISION, arch))
    params = re.search(rf"\.entry\s+{cuda_probe.cuda_ert_kernel()}\s*\((.*?)\)", ptx, re.DOTALL)
    assert params is not None
    kinds = re.findall(r"\.param\s+\.(\w+)", params.group(1))
    # buffer pointer, n (long long), trials (int), alpha, beta, gamma (double): what CudaDramProbe.build packs
    assert kinds == ["u64", "u64", "u32", "f64", "f64", "f64"]
    fake = FakeCupy(bandwidth=1e12)
    cuda_probe.CudaDramProbe.build(spec_of(gpu()), cupy=fake)
    _, _, args = fake.launches[0]
    assert [type(a) for a in args[1:]] == [np.int64, np.int32, np.float64, np.float64, np.float64]


@needs_nvrtc
@pytest.mark.parametrize("arch", cuda_ert.ARCHITECTURES)
def test_ptxas_assembles_the_probe_kernel(arch: int) -> None:
    _skip_unbuildable(arch)
    cubin = cuda_ert.compile_kernels(cuda_probe.PRECISION, arch, cubin=True)
    assert isinstance(cubin, bytes) and cubin[:4] == b"\x7fELF"


# --- choosing the probe -----------------------------------------------------------------------------------

def spec_of(machine: Machine) -> cuda_probe.CudaProbeSpec:
    spec = cuda_probe.CudaProbeSpec.resolve(machine)
    assert isinstance(spec, cuda_probe.CudaProbeSpec), spec
    return spec


def test_the_probe_is_the_smallest_plateau_point_of_several_l2s_calibrated_by_its_sweep_row() -> None:
    spec = spec_of(gpu())
    # 128 MiB is outside the plateau; 256 MiB (>= 4 x 50 MiB) is its smallest point; the fp32 row is another kernel
    assert spec == cuda_probe.CudaProbeSpec(device_index=1, working_set_bytes=256 * MiB, trials=8, blocks=1056,
                                            threads_per_block=256, calibration_bytes_per_s=2.8e12,
                                            roof_bytes_per_s=3.0e12)
    assert spec.threads == 1056 * 256
    # A plateau that starts below 4 x L2 (an older record, a pinned window): the L2 rule moves the probe up.
    wide = spec_of(gpu(plateau_mib=(128, 1024)))
    assert (wide.working_set_bytes, wide.calibration_bytes_per_s) == (256 * MiB, 2.8e12)
    bigger_l2 = spec_of(gpu(plateau_mib=(128, 1024), l2_mib=100))  # 4 x 100 MiB: 512 MiB is the first
    assert (bigger_l2.working_set_bytes, bigger_l2.calibration_bytes_per_s) == (512 * MiB, 2.9e12)


def test_the_probe_is_the_kernel_and_the_row_the_hbm_sweep_records() -> None:
    """Ties the probe to characterize/cuda.py: the sweep runs ("fp64", 1) and each row is a GpuPoint."""
    ran: list[tuple[str, int, int]] = []

    class Sweeper:
        def measure(self, precision: str, flops: int, size: int) -> cuda_ert.GpuPoint:
            ran.append((precision, flops, size))
            return cuda_ert.GpuPoint(precision, flops, size, 8, 0.002, 1056, 256)

    cuda_ert.GpuErt.bandwidth_sweep(Sweeper(), [256 * MiB], lambda _: None)  # type: ignore[arg-type]
    assert ran == [(cuda_probe.PRECISION, cuda_probe.FLOPS, 256 * MiB)]
    point = cuda_ert.GpuPoint("fp64", 1, 256 * MiB, 8, 0.002, 1056, 256)
    spec = spec_of(gpu(rows=[point.to_row()]))
    # 2 x 256 MiB x 8 passes in 2 ms = 2^32 B / 0.002 s
    assert spec.calibration_bytes_per_s == pytest.approx(2**32 / 0.002)
    assert (spec.working_set_bytes, spec.trials, spec.blocks, spec.threads_per_block) == (256 * MiB, 8, 1056, 256)


def test_no_probe_without_a_calibration_says_why() -> None:
    pinned = Machine("pinned", {"fp32": 1e12}, {"HBM": 2e12}, info={"device": "cuda:0", "source": "pinned"})
    assert "no calibration" in str(cuda_probe.CudaProbeSpec.resolve(pinned))
    no_l2 = gpu()
    no_l2 = Machine(no_l2.name, no_l2.peak_flops, no_l2.bandwidth, {**no_l2.info, "fingerprint": {}})
    assert "L2 size is unknown" in str(cuda_probe.CudaProbeSpec.resolve(no_l2))
    assert "4x the L2" in str(cuda_probe.CudaProbeSpec.resolve(gpu(plateau_mib=(128, 199))))
    no_roof = Machine("gpu", {"fp64": 1e12}, {"L2": 1e12}, info=gpu().info)
    assert "no HBM roof" in str(cuda_probe.CudaProbeSpec.resolve(no_roof))


def test_device_and_kind_come_from_the_machine_record() -> None:
    assert cuda_probe.is_cuda(gpu()) and cuda_probe.device_index(gpu()) == 1
    cpu = Machine("cpu", {"fp32": 1e9}, {"DRAM": 1e9}, info={"method": "ert", "device": "cpu"})
    assert not cuda_probe.is_cuda(cpu)
    assert cuda_probe.cache_key(0) == -1 and cuda_probe.cache_key(1) == -2  # CPU keys are thread counts >= 1


def test_only_working_sets_that_cannot_stay_in_l2_are_probed() -> None:
    m = gpu()  # L2 50 MiB
    assert cuda_probe.wants_probe(100 * MiB, m, hbm_bytes=1.0)
    assert not cuda_probe.wants_probe(99 * MiB, m, hbm_bytes=1.0)
    assert not cuda_probe.wants_probe(100 * MiB, m, hbm_bytes=0.0)
    assert not cuda_probe.wants_probe(None, m, hbm_bytes=1.0)


def test_live_roof_is_the_roof_scaled_by_rate_over_calibration() -> None:
    spec = spec_of(gpu())
    live = cuda_probe.live_machine(gpu(), spec, 2.1e12)  # HBM at 0.75 of the calibration's 2.8 TB/s
    assert live.bandwidth["HBM"] == pytest.approx(2.25e12) and live.bandwidth["L2"] == 10e12


# --- running the probe on a fake CuPy ---------------------------------------------------------------------

class FakeGpu:
    """A device whose clock moves only when a kernel runs: 2 x working set x trials / bandwidth per launch."""

    def __init__(self, bandwidth: float) -> None:
        self.bandwidth, self.now = bandwidth, 0.0
        self.log: list[str] = []


class FakeStream:
    """A stream that logs when it becomes current (CuPy launches on the current stream)."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def __enter__(self) -> None:
        self.log.append(f"use {self.name}")

    def __exit__(self, *exc: object) -> None:
        self.log.append(f"leave {self.name}")


class FakeCupy(types.SimpleNamespace):
    def __init__(self, bandwidth: float) -> None:
        device = FakeGpu(bandwidth)
        launches: list[tuple[tuple[int, ...], tuple[int, ...], tuple[Any, ...]]] = []
        current = FakeStream("current", device.log)

        class Device:
            def __init__(self, index: int) -> None:
                self.index = index

            def __enter__(self) -> None:
                device.log.append(f"device {self.index}")

            def __exit__(self, *exc: object) -> None:
                pass

            def synchronize(self) -> None:
                device.log.append("synchronize")

        class Stream:
            null = FakeStream("null", device.log)

            @staticmethod
            def from_external(stream: Any) -> FakeStream:
                return FakeStream(f"protocol {stream.__cuda_stream__()[1]:#x}", device.log)

        class Event:
            def record(self, stream: Any = None) -> None:
                self.at = device.now
                device.log.append(f"record on {stream.name}")

            def synchronize(self) -> None:
                device.log.append("event synchronize")

        def kernel(grid: tuple[int, ...], block: tuple[int, ...], args: tuple[Any, ...]) -> None:
            launches.append((grid, block, args))
            device.log.append("launch")
            device.now += 2.0 * int(args[1]) * 8 * int(args[2]) / device.bandwidth

        class RawModule:
            def __init__(self, *, code: str, options: tuple[str, ...], backend: str) -> None:
                self.options = options
                device.log.append(f"compile {' '.join(options)} {backend}")

            def get_function(self, name: str) -> Callable[..., None]:
                device.log.append(f"function {name}")
                return kernel

        super().__init__(
            float64=np.float64, ones=lambda n, dtype: np.ones(1, dtype=dtype), RawModule=RawModule,
            cuda=types.SimpleNamespace(
                Device=Device, Event=Event, Stream=Stream,
                ExternalStream=lambda pointer, index: FakeStream(f"external {pointer:#x} on {index}", device.log),
                get_current_stream=lambda index: current,
                get_elapsed_time=lambda start, stop: (stop.at - start.at) * 1e3))  # milliseconds, as CUDA's
        self.gpu, self.launches = device, launches


def test_the_fake_has_only_what_the_real_cupy_has() -> None:
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed: the fake cannot be checked against it")
    fake = FakeCupy(bandwidth=1e12)
    for name in vars(fake.cuda):
        assert hasattr(cupy.cuda, name), name
    assert all(hasattr(cupy, name) for name in ("RawModule", "ones", "float64"))
    assert hasattr(cupy.cuda.Stream, "null") and hasattr(cupy.cuda.Device, "synchronize")
    assert hasattr(cupy.cuda.Stream, "from_external") or int(cupy.__version__.split(".")[0]) < 14
    assert all(hasattr(cupy.cuda.Event, name) for name in ("record", "synchronize"))
    assert "backend" in (cupy.RawModule.__doc__ or "") and "options" in (cupy.RawModule.__doc__ or "")


def test_a_probe_launch_is_timed_by_events_after_a_device_synchronization() -> None:
    spec = spec_of(gpu())
    fake = FakeCupy(bandwidth=2.1e12)
    probe = cuda_probe.CudaDramProbe.build(spec, cupy=fake)
    assert fake.gpu.log[:3] == ["device 1", "compile -DERT_FP64 -w nvrtc", "function ert_fp64_f1"]
    assert len(fake.launches) == 1  # built with one untimed launch (module load, first pass)
    fake.gpu.log.clear()
    assert probe.rate() == pytest.approx(2.1e12)  # 2 x 256 MiB x 8 passes in 2.045 ms
    assert fake.gpu.log == ["device 1", "synchronize", "use current", "record on current", "launch",
                            "record on current", "leave current", "event synchronize"]
    grid, block, args = fake.launches[-1]
    assert (grid, block) == ((1056,), (256,))  # the launch of the calibration's sweep row
    assert [int(args[1]), int(args[2])] == [256 * MiB // 8, 8] and [float(a) for a in args[3:]] == [0.5, 0.5, 1.0]


def test_the_probe_runs_on_torchs_current_stream_when_torch_drives_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    class TorchStream:
        cuda_stream = 0x1234

        def __cuda_stream__(self) -> tuple[int, int]:
            return (0, self.cuda_stream)

    stream = TorchStream()
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(
        is_available=lambda: True, is_initialized=lambda: True, current_stream=lambda index: stream))
    monkeypatch.setitem(sys.modules, "torch", torch)
    fake = FakeCupy(bandwidth=1e12)
    assert cuda_probe.call_site_stream(fake, 1).name == "protocol 0x1234"  # CuPy 14+: Stream.from_external
    monkeypatch.delattr(fake.cuda.Stream, "from_external")
    assert cuda_probe.call_site_stream(fake, 1).name == "external 0x1234 on 1"  # older CuPy: a raw pointer
    stream.cuda_stream = 0  # torch's legacy default stream is CuPy's null stream
    assert cuda_probe.call_site_stream(fake, 1).name == "null"
    monkeypatch.delitem(sys.modules, "torch")
    assert cuda_probe.call_site_stream(fake, 1).name == "current"  # CuPy alone: its current stream


def test_probes_cost_at_most_the_calls_own_time_on_the_gpu() -> None:
    spec = spec_of(gpu())
    # 2 x 256 MiB x 8 passes = 4 GiB per probe; at 2^32 / 0.002 B/s a probe takes exactly 2 ms
    fake = FakeCupy(bandwidth=2 * 256 * MiB * 8 / 0.002)
    schedule = probes.ProbeSchedule(cuda_probe.CudaDramProbe.build(spec, cupy=fake), clock=lambda: fake.gpu.now)
    for previous in [0.0, 0.0015, 0.0015, 0.0015, 0.0015, 0.0015]:  # 1.5 ms calls
        schedule(previous)
    # a probe before the first call, then one each time the calls since the last one took >= 2 ms: before
    # calls 0, 2 and 4; 6 ms of probes beside 7.5 ms of calls
    assert len(schedule.probes) == 3 and schedule.probe_seconds == pytest.approx(0.006)
    assert schedule.rates == [pytest.approx(2 * 256 * MiB * 8 / 0.002)] * 6


class FakeProbe:
    def __init__(self, spec: cuda_probe.CudaProbeSpec, rates: list[float]) -> None:
        self.spec, self._rates, self.built = spec, iter(rates), 0

    def rate(self) -> float:
        return next(self._rates)


def test_each_call_is_judged_against_its_probes_hbm_roof() -> None:
    m = gpu()
    spec = spec_of(m)
    schedule = probes.ProbeSchedule(FakeProbe(spec, [2.8e12, 1.4e12, 2.8e12]), clock=lambda: 0.0)
    for _ in range(3):
        schedule(1.0)
    # 3 GB at HBM ("DRAM" as the analytic counter names it): 1 ms at the 3 TB/s roof. The second call took twice
    # as long while HBM gave half the calibration's 2.8 TB/s.
    kernels = [KernelSample("copy", {}, {"DRAM": 3e9})]
    timing = summarize([0.00125, 0.0025, 0.00125])
    cached = evaluate_region(kernels, m, 0.00125)
    verdict, record, note = judge_live(kernels, m, timing, schedule, cached)
    assert verdict.fraction == pytest.approx(0.8)  # 1 ms / 1.25 ms against each call's live roof
    assert record["level"] == "HBM" and record["device"] == "cuda:1" and record["kernel"] == "ert_fp64_f1"
    assert record["live_ratio_median"] == pytest.approx(1.0) and record["probes"] == 3
    assert record["launch"] == {"blocks": 1056, "threads_per_block": 256, "trials": 8}
    assert "live HBM probe: HBM gave 1.00" in note and "0.8" in note


# --- through the Recorder ---------------------------------------------------------------------------------

class HbmCounter(CounterBase):
    name = "fake"

    def __init__(self, footprint: float, level: str = "DRAM", bytes_moved: float = 3e9) -> None:
        self.footprint_bytes, self.level, self.bytes_moved = footprint, level, bytes_moved

    def count(self, fn: Callable[..., Any], args: tuple[Any, ...],
              kwargs: Mapping[str, Any]) -> tuple[Any, list[KernelSample]]:
        return fn(*args, **kwargs), [KernelSample("copy", {}, {self.level: self.bytes_moved})]


def recorder(machine: Machine, counter: HbmCounter, cache: dict[int, Any]) -> Recorder:
    r = Recorder(enabled=True, machine=lambda: machine, counter=lambda: counter,
                 policy=TimingPolicy(max_time_s=0.05, min_rounds=3, max_rounds=5, first_batch=3, min_warmup=1,
                                     quiet_warmup=1))
    r.probe_mode, r.probe_cache = "live", cache
    return r


def test_the_recorder_judges_gpu_regions_on_the_records_hbm_roof_without_a_probe() -> None:
    """On a GPU the record's roofs judge and no probe runs between the test's own calls."""
    m = gpu()
    spec = spec_of(m)
    cache: dict[int, Any] = {cuda_probe.cache_key(1): FakeProbe(spec, [])}  # asked for a rate, it would raise
    r = recorder(m, HbmCounter(footprint=200 * MiB), cache)
    r.measure(lambda: None)
    region = r.regions[0]
    assert region.probe is None and not any("probe" in note for note in region.notes)
    assert region.device == "cuda" and region.to_dict()["device"] == "cuda"
    t_min = 3e9 / m.bandwidth["HBM"]  # the cached roof, whatever the probe would have said
    assert region.verdict.t_min == pytest.approx(t_min)
    pinned = Machine("pinned", {"fp32": 1e12}, {"HBM": 2e12},
                     info={"device": "cuda:0", "fingerprint": {"l2_bytes": 50 * MiB}})
    r = recorder(pinned, HbmCounter(footprint=200 * MiB), {})
    r.measure(lambda: None)
    assert r.regions[0].probe is None and not any("probe" in n for n in r.regions[0].notes)


def test_a_probe_that_cannot_be_built_becomes_a_note_and_a_built_one_is_reused() -> None:
    m = gpu()
    kernels = [KernelSample("copy", {}, {"HBM": 3e9})]

    def broken(spec: cuda_probe.CudaProbeSpec) -> Any:
        raise MemoryError("out of memory allocating 268,435,456 bytes")

    failed = cuda_probe.schedule_for(m, kernels, 200 * MiB, {}, build=broken)
    assert isinstance(failed, cuda_probe.Unprobed) and "MemoryError: out of memory" in failed.note
    built: list[cuda_probe.CudaProbeSpec] = []

    def build(spec: cuda_probe.CudaProbeSpec) -> FakeProbe:
        built.append(spec)
        return FakeProbe(spec, [])

    cache: dict[int, Any] = {}
    first = cuda_probe.schedule_for(m, kernels, 200 * MiB, cache, build=build)
    second = cuda_probe.schedule_for(m, kernels, 200 * MiB, cache, build=build)
    assert isinstance(first, probes.ProbeSchedule) and isinstance(second, probes.ProbeSchedule)
    assert first.probe is second.probe and built == [spec_of(m)] and list(cache) == [-2]


# --- on a GPU ---------------------------------------------------------------------------------------------

def _gpu_problem() -> str | None:
    try:
        import cupy

        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as error:  # noqa: BLE001 - no CuPy, no driver: CuPy raises its own errors
        return f"needs a CUDA GPU with CuPy ({type(error).__name__}: {error})"
    return None if count > 0 else "needs a CUDA GPU (CuPy sees none)"


@pytest.mark.skipif(_gpu_problem() is not None, reason=str(_gpu_problem()))
def test_on_a_gpu_the_probe_reads_its_sweep_row_and_a_streaming_region_is_judged_on_the_record() -> None:
    """The probe on its own reads near its calibration (the H100: it did); the Recorder builds none on a GPU
    (``Recorder.probe_for``) and judges an in-place scale of 8 L2s on the record's HBM roof."""
    import cupy

    from pytest_roofline.characterize.machine import characterize

    machine = characterize("cuda")  # the session's cache ($PYTEST_ROOFLINE_CACHE), measured if absent
    spec = cuda_probe.CudaProbeSpec.resolve(machine)
    assert isinstance(spec, cuda_probe.CudaProbeSpec), spec
    probe = cuda_probe.CudaDramProbe.build(spec)
    ratios = [probe.rate() / spec.calibration_bytes_per_s for _ in range(5)]
    # the same launch as its sweep row on a quiet GPU: near 1 (a loose bound)
    assert all(0.5 < r < 1.2 for r in ratios), ratios
    size = 8 * cuda_probe.l2_bytes(machine)
    x = cupy.ones(size // 4, dtype=cupy.float32)

    def scale() -> None:
        x.__imul__(1.0)  # in place: reads and writes every byte once

    counter = HbmCounter(footprint=size, level="HBM", bytes_moved=2.0 * size)
    cache: dict[int, Any] = {}
    r = recorder(machine, counter, cache)
    r.measure(scale)
    region = r.regions[0]
    assert region.probe is None and cache == {} and region.device == "cuda", region.notes
    assert region.verdict.t_min == pytest.approx(2.0 * size / machine.bandwidth["HBM"])
    # a streaming kernel of 8 L2s reaches most of the triad's HBM roof (the H100's copy: 2.96 of 2.87 TB/s)
    assert 0.5 < region.verdict.fraction <= 1.2, region.verdict.fraction
