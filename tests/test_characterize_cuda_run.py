"""characterize_cuda end to end on a fake CuPy whose kernels take the time an H100-like model gives them: the
orchestration (sweep, roof kernels, GEMM series, names, sources) without a GPU. What the real kernels read on
hardware is not tested here (verified offline only: see test_characterize_cuda_roofs.py)."""

from __future__ import annotations

import re
import sys
import types
from typing import Any, ClassVar

import numpy as np
import pytest

from pytest_roofline.characterize import cuda, validate

MiB = 2**20
LAUNCH_S = 5e-6
L2_BYTES = 4 * MiB
# The model: what each kernel would read
SWEEP = ((1 * MiB, 7.5e12), (3 * MiB, 7.6e12), (float("inf"), 2.8e12))  # ERT update: (up to bytes, B/s)
L1_RATE, TRIAD_RATE = 32e12, 3.03e12
PEAK = {"fp64": 33e12, "fp32": 66e12, "fp16x2": 66e12, "bf16x2": 66e12}
ERT_PEAK = {"fp64": 32e12, "fp32": 62e12, "fp16": 63e12, "bf16": 63e12}
GEMM = {np.dtype(np.float64): 64e12, np.dtype(np.float16): 750e12}


class _Clock:
    now = 0.0


def _kernel_seconds(name: str, grid: int, args: tuple[Any, ...]) -> float:
    if name.startswith("ert_"):
        precision, flops = re.match(r"ert_(\w+)_f(\d+)", name).groups()  # type: ignore[union-attr]
        n, trials = int(args[1]), int(args[2])
        element = 8 if precision == "fp64" else 4
        rate = next(r for limit, r in SWEEP if n * element <= limit)
        return max(2 * n * element * trials / rate, int(flops) * n * trials / ERT_PEAK[precision])
    if name.startswith("l1_read_v"):
        vectors = int(name.removeprefix("l1_read_v"))
        return grid * int(args[1]) * vectors * 256 * 16 / L1_RATE
    if name == "hbm_triad":
        return 48 * int(args[4]) / TRIAD_RATE
    if name.startswith("peak_"):
        kind = name.removeprefix("peak_")
        per_fma = 4 if kind.endswith("x2") else 2
        return grid * 256 * int(args[1]) * 64 * per_fma / PEAK[kind]
    raise AssertionError(name)


def _fake_cupy(free_bytes: int) -> types.SimpleNamespace:
    clock = _Clock()
    names: list[str] = []

    class Device:
        attributes: ClassVar[dict[str, int]] = {"MultiProcessorCount": 132, "L2CacheSize": L2_BYTES,
                                                 "MaxThreadsPerMultiProcessor": 2048,
                                                 "MaxSharedMemoryPerMultiprocessor": 228 * 1024}
        compute_capability = "90"

        def __init__(self, index: int) -> None:
            assert index == 0

        def use(self) -> None:
            pass

    class Event:
        def record(self) -> None:
            self.at = clock.now

        def synchronize(self) -> None:
            pass

    class RawModule:
        def __init__(self, *, code: str, options: tuple[str, ...], backend: str) -> None:
            assert backend == "nvrtc"

        def get_function(self, name: str) -> Any:
            names.append(name)

            def launch(grid: tuple[int], block: tuple[int], args: tuple[Any, ...]) -> None:
                assert block == (256,)
                clock.now += LAUNCH_S + _kernel_seconds(name, grid[0], args)

            return launch

    def matmul(a: Any, b: Any) -> Any:
        clock.now += LAUNCH_S + 2.0 * a.shape[0] ** 3 / GEMM[a.dtype]
        return a

    def random(shape: tuple[int, int]) -> Any:  # a stand-in matrix: its shape and dtype, no data
        return types.SimpleNamespace(astype=lambda dtype: types.SimpleNamespace(shape=shape, dtype=np.dtype(dtype)))

    pool = types.SimpleNamespace(free_all_blocks=lambda: None)
    return types.SimpleNamespace(
        uint32=np.uint32, float32=np.float32, float64=np.float64, float16=np.float16,
        # Buffers are stand-ins (a kernel's time comes from its arguments), so an 80 GB GPU fits in a test
        zeros=lambda n, dtype: np.zeros(min(n, 4096), dtype=dtype),
        ones=lambda n, dtype: np.ones(min(n, 4096), dtype=dtype),
        RawModule=RawModule, matmul=matmul, random=types.SimpleNamespace(random=random),
        get_default_memory_pool=lambda: pool,
        cuda=types.SimpleNamespace(Device=Device, Event=Event,
                                   runtime=types.SimpleNamespace(memGetInfo=lambda: (free_bytes, 80 * 2**30)),
                                   get_elapsed_time=lambda start, stop: (stop.at - start.at) * 1e3),
        names=names)


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    fake = _fake_cupy(free_bytes=79 * 2**30)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: False))
    monkeypatch.setitem(sys.modules, "torch", torch)  # no torch GPU: the CuPy GEMM path
    return fake


def test_characterize_cuda_on_a_modelled_gpu(fake_gpu: types.SimpleNamespace) -> None:
    lines: list[str] = []
    machine = cuda.characterize_cuda(0, {"gpu_name": "model H100"}, lines.append)
    sources = machine.info["sources"]
    # L1 from its own kernel (the model's 32 TB/s less 5 us per 2 ms launch), not the sweep's 7.5
    assert machine.bandwidth["L1"] == pytest.approx(L1_RATE, rel=0.01)
    assert sources["bandwidth.L1"].startswith("l1_read_v")
    assert 7.0e12 < machine.info["sweep_bandwidth"]["L1"] <= 7.5e12  # the sweep's, launch-bound, kept as info
    # HBM: the triad beats the sweep's 2.8
    n4 = 3 * 2**30 // 48  # three arrays of 1 GiB
    assert machine.bandwidth["HBM"] == pytest.approx(48 * n4 / (LAUNCH_S + 48 * n4 / TRIAD_RATE))
    assert sources["bandwidth.HBM"].startswith("hbm_triad")
    assert machine.bandwidth["L2"] == pytest.approx(7.6e12, rel=0.03)  # the sweep, as before
    # CUDA-core peaks from the register-only kernels, Tensor Core roofs apart
    assert machine.peak_flops["fp16"] == pytest.approx(PEAK["fp16x2"], rel=0.01)
    assert machine.peak_flops["bf16"] == pytest.approx(PEAK["bf16x2"], rel=0.01)
    assert machine.peak_flops["fp64"] == pytest.approx(PEAK["fp64"], rel=0.01)
    assert sources["peak_flops.fp16"] == "peak_fp16x2"
    assert machine.peak_flops["fp16_tensor"] == pytest.approx(750e12, rel=0.01)
    assert machine.peak_flops["fp64_tensor"] == pytest.approx(64e12, rel=0.01)
    assert machine.info["gemm_runs"]["fp16"] >= 10
    assert validate.check_machine(machine) == []
    reconciled = validate.reconcile(machine, native={"fp16", "bf16"})
    assert reconciled.peak_flops["fp16"] == machine.peak_flops["fp16"]  # no GEMM overwrote it
    assert {"l1_read_v2", "l1_read_v4", "l1_read_v8", "hbm_triad", "peak_bf16x2"} <= set(fake_gpu.names)
    assert any(line.startswith("L1: ") for line in lines), lines
