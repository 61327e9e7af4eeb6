"""CUDA characterization: ERT kernels through NVRTC for the L2/HBM sweep and FMA sweeps, dedicated roof kernels
(``roof_kernels.cu``) for L1, the HBM triad and the CUDA-core FMA peaks, cuBLAS GEMM for the Tensor Core roofs.

Measured on an H100 (docs/gpu.md); the roof kernels and the GEMM series added
after it are verified offline only (NVRTC compiles them, the PTX holds the counted loads and FMAs).

Ceiling names, as the ncu counter and the model use them: ``L1``, ``L2``, ``HBM``; ``fp64``/``fp32``/``fp16``/
``bf16`` are CUDA-core FMA roofs (the best of the ERT sweep and the packed/scalar peak kernel); Tensor Core
roofs carry ``_tensor`` (``fp64_tensor`` on sm_80+, ``tf32_tensor``, ``fp16_tensor``, ``bf16_tensor``,
``fp8_tensor`` on sm_89+) from cuBLAS GEMM. A CUDA-core roof far below the Tensor Core roof of its
precision is what a GPU is (validate.gemm_roof_name). TF32 and FP8 exist only on Tensor Cores, so ``tf32``
and ``fp8`` are also set to their tensor roof.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from pytest_roofline.characterize import plateaus
from pytest_roofline.characterize.cpu_ert import working_set_sizes
from pytest_roofline.model import TENSOR_SUFFIX, Machine

SIZES_PER_OCTAVE = 6
GEMM_SIZES = (4096, 8192)


def characterize_cuda(index: int, fingerprint_fields: Mapping[str, object], progress: Callable[[str], None],
                      ) -> Machine:
    from pytest_roofline.characterize.cuda_ert import PRECISIONS, GpuErt, supported

    start = time.perf_counter()
    import cupy

    attributes = cupy.cuda.Device(index).attributes
    multiprocessors = int(attributes["MultiProcessorCount"])
    l2_bytes = int(attributes.get("L2CacheSize", 0)) or 40 * 2**20
    # CUDA reports no L1 size; the shared-memory carve-out per SM is a lower bound for it.
    l1_per_sm = int(attributes.get("MaxSharedMemoryPerMultiprocessor", 0)) or 128 * 1024
    free_bytes, _ = cupy.cuda.runtime.memGetInfo()
    largest = min(max(8 * l2_bytes, 1 << 30), free_bytes // 4)
    progress(f"GPU sweep up to {largest / 2**20:.0f} MiB ({multiprocessors} SMs, L2 {l2_bytes / 2**20:.0f} MiB)")
    ert = GpuErt(index, largest)
    launch, arch = (ert.blocks, ert.threads_per_block), ert.arch
    sizes = working_set_sizes(64 * 1024, largest, SIZES_PER_OCTAVE, 4096)
    points = ert.bandwidth_sweep(sizes, progress)

    aggregate_l1 = multiprocessors * l1_per_sm
    l1_high = min(0.5 * aggregate_l1, 0.25 * l2_bytes)
    windows = {"L1": (float(sizes[0]), l1_high), "L2": (2.0 * l1_high, 0.75 * l2_bytes),
               "HBM": (4.0 * l2_bytes, float(largest))}
    found = plateaus.extract_plateaus([p.working_set_bytes for p in points], [p.bandwidth for p in points], windows)
    swept = {level: plateau.bytes_per_s for level, plateau in found.items()}
    bandwidth = {level: value for level, value in swept.items() if level != "L1"}  # L1: its own kernel below
    sources = {f"bandwidth.{level}": "ert-update-fp64" for level in bandwidth}

    peak_flops: dict[str, float] = {}
    flop_points = []
    compute_size = min(largest, max(16 * 2**20, l2_bytes // 2))
    for precision in PRECISIONS:
        if not supported(precision, ert.arch):
            continue
        sweep = ert.flops_sweep(precision, compute_size)
        flop_points += sweep
        peak_flops[precision] = max(p.flop_rate for p in sweep)
        sources[f"peak_flops.{precision}"] = "ert-fma"
        progress(f"{precision}: {peak_flops[precision] / 1e12:.2f} TFLOP/s (ERT FMA)")
    del ert
    _release_pool()  # the sweep buffer, before the triad's arrays are allocated

    # The triad's three arrays of 1 GiB each (8 L2s where that is more), as torch's yardstick on the H100
    triad_bytes = min(3 * max(1 << 30, 8 * l2_bytes), free_bytes // 2)
    roof_rows = _roof_kernels(index, triad_bytes, swept, bandwidth, peak_flops, sources, progress)
    gemm_series = _gemm_roofs(index, arch, progress)
    gemm = {k: (value, source) for k, (value, source, _) in gemm_series.items()}
    for precision, (value, source) in gemm.items():
        peak_flops[precision + TENSOR_SUFFIX] = value
        sources[f"peak_flops.{precision}{TENSOR_SUFFIX}"] = source
        if precision in ("tf32", "fp8"):
            peak_flops[precision] = value
            sources[f"peak_flops.{precision}"] = source
    info = {"method": "ert-cuda", "sources": sources, "gemm_flops": {k: v for k, (v, _) in gemm.items()},
            "levels": {level: {"window_bytes": list(p.window), "points": p.points,
                               "plateau_bytes": [p.first_bytes, p.last_bytes]} for level, p in found.items()},
            "sweep": {"update": [p.to_row() for p in points], "flops": [p.to_row() for p in flop_points]},
            "sweep_bandwidth": swept, "roof_kernels": roof_rows,
            "gemm_runs": {k: runs for k, (_, _, runs) in gemm_series.items()},
            "launch": {"blocks": launch[0], "threads_per_block": launch[1]},
            "measure_seconds": time.perf_counter() - start, "roof_kernels_verified_offline_only": True}
    return Machine(name=str(fingerprint_fields.get("gpu_name", f"cuda:{index}")), peak_flops=peak_flops,
                   bandwidth=bandwidth, info=info)


# The SMs' L1 reads a few times faster than their L2 (H100 ~33 vs 7.6 TB/s, A100 ~19 vs 5, V100 ~14 vs 2.5); a
# reading far above that timed no loads (the H100 once read 118 TB/s when ptxas hoisted fixed-address loads).
L1_OVER_L2_MAX = 8.0


def _roof_kernels(index: int, triad_bytes: int, swept: dict[str, float], bandwidth: dict[str, float],
                  peak_flops: dict[str, float], sources: dict[str, str], progress: Callable[[str], None]
                  ) -> dict[str, object]:
    """L1 from its read-only kernel, HBM as the better of the sweep's plateau and the triad, each CUDA-core peak
    as the better of the ERT sweep and the register-only kernel; updates the tables, returns the readings."""
    from pytest_roofline.characterize.cuda_roofs import GpuRoofs

    rows: dict[str, object] = {}
    try:
        roofs = GpuRoofs(index)
        l1 = roofs.l1()
        triad = roofs.triad(triad_bytes)
        peaks = roofs.peaks()
    except Exception as error:  # noqa: BLE001 - a kernel that fails leaves the sweep's roofs, said why
        rows["error"] = f"{type(error).__name__}: {error}"
        progress(f"roof kernels failed ({rows['error']}); L1 and HBM from the sweep")
        if "L1" in swept:
            bandwidth["L1"], sources["bandwidth.L1"] = swept["L1"], "ert-update-fp64 (launch-bound)"
        return rows
    del roofs
    _release_pool()  # the triad's 3 GiB, before cuBLAS allocates
    l1_row = l1.to_row()
    rows["L1"], rows["HBM"] = l1_row, triad.to_row()
    l2 = bandwidth.get("L2") or swept.get("L2") or 0.0
    if l2 and l1.value > L1_OVER_L2_MAX * l2:
        l1_row["rejected"] = f"above {L1_OVER_L2_MAX:g}x L2 ({l2 / 1e12:.2f} TB/s): the loads never reached L1"
        progress(f"L1: {l1.value / 1e12:.2f} TB/s from {l1.kernel} is not a cache read ({l1_row['rejected']}); "
                 "L1 from the sweep")
        if "L1" in swept:
            bandwidth["L1"], sources["bandwidth.L1"] = swept["L1"], "ert-update-fp64 (launch-bound)"
    else:
        bandwidth["L1"], sources["bandwidth.L1"] = l1.value, f"{l1.kernel} ({l1.detail})"
        progress(f"L1: {l1.value / 1e12:.2f} TB/s ({l1.kernel}, {l1.detail}; sweep "
                 f"{swept.get('L1', 0.0) / 1e12:.2f})")
    if triad.value >= bandwidth.get("HBM", 0.0):
        bandwidth["HBM"], sources["bandwidth.HBM"] = triad.value, f"hbm_triad ({triad.detail})"
    progress(f"HBM: triad {triad.value / 1e12:.2f} TB/s, sweep {swept.get('HBM', 0.0) / 1e12:.2f}")
    for roof, reading in peaks.items():
        rows[f"peak_{roof}"] = reading.to_row()
        if reading.value > peak_flops.get(roof, 0.0):
            peak_flops[roof], sources[f"peak_flops.{roof}"] = reading.value, reading.kernel
        progress(f"{roof}: {reading.value / 1e12:.2f} TFLOP/s ({reading.kernel}, CUDA cores)")
    return rows


def _release_pool() -> None:
    """CuPy's cached blocks back to the driver; best effort (only memory is at stake)."""
    try:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
    except Exception:  # noqa: BLE001, S110
        pass


def _gemm_roofs(index: int, arch: int, progress: Callable[[str], None]) -> dict[str, tuple[float, str, int]]:
    """Best GEMM FLOP/s per precision through cuBLAS (torch when it has CUDA, else CuPy)."""
    try:
        import torch

        if torch.cuda.is_available():
            return _torch_gemm(torch, index, arch, progress)
    except ImportError:
        pass
    return _cupy_gemm(progress)


def _torch_gemm(torch: ModuleType, index: int, arch: int, progress: Callable[[str], None]
                ) -> dict[str, tuple[float, str, int]]:
    device = torch.device("cuda", index)
    dtypes = {"fp64": torch.float64, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    roofs: dict[str, tuple[float, str, int]] = {}
    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for precision, dtype in dtypes.items():
            if precision == "bf16" and arch < 80:
                continue
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
            best, runs = 0.0, 0
            for n in GEMM_SIZES:
                a = torch.randn(n, n, device=device).to(dtype)
                seconds, done = _time_cuda(torch, functools.partial(torch.mm, a, a))
                best, runs = max(best, 2.0 * n**3 / seconds), runs + done
            roofs[precision] = (best, "torch-cublas-gemm", runs)
            progress(f"{precision} GEMM: {best / 1e12:.1f} TFLOP/s")
        if arch >= 89 and hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn"):
            best, runs = 0.0, 0
            for n in GEMM_SIZES:
                a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
                b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()
                one = torch.ones((), device=device)
                scaled = functools.partial(torch._scaled_mm, a, b, scale_a=one, scale_b=one,
                                           out_dtype=torch.bfloat16)
                seconds, done = _time_cuda(torch, scaled)
                best, runs = max(best, 2.0 * n**3 / seconds), runs + done
            roofs["fp8"] = (best, "torch-scaled-mm", runs)
            progress(f"fp8 GEMM: {best / 1e12:.1f} TFLOP/s")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous_tf32
    return roofs


def _time_cuda(torch: ModuleType, run: Callable[[], object]) -> tuple[float, int]:
    """(fastest seconds, runs) of ``run`` timed with CUDA events until the best is stable."""
    from pytest_roofline.characterize.cuda_roofs import best_until_stable

    run()
    torch.cuda.synchronize()

    def once() -> float:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        return float(start.elapsed_time(stop)) / 1e3

    return best_until_stable(once)


def _cupy_gemm(progress: Callable[[str], None]) -> dict[str, tuple[float, str, int]]:
    import cupy

    from pytest_roofline.characterize.cuda_roofs import best_until_stable

    roofs: dict[str, tuple[float, str, int]] = {}
    for precision, dtype in (("fp64", cupy.float64), ("fp16", cupy.float16)):
        best, runs = 0.0, 0
        for n in GEMM_SIZES:
            a = cupy.random.random((n, n)).astype(dtype)
            cupy.matmul(a, a)

            def once(a: Any = a) -> float:  # a cupy.ndarray (cupy is untyped)
                start, stop = cupy.cuda.Event(), cupy.cuda.Event()
                start.record()
                cupy.matmul(a, a)
                stop.record()
                stop.synchronize()
                return float(cupy.cuda.get_elapsed_time(start, stop)) / 1e3

            seconds, done = best_until_stable(once)
            best, runs = max(best, 2.0 * n**3 / seconds), runs + done
        roofs[precision] = (best, "cupy-cublas-gemm", runs)
        progress(f"{precision} GEMM: {best / 1e12:.1f} TFLOP/s")
    return roofs
