"""CUDA characterization: ERT kernels through NVRTC for bandwidth and vector peaks, cuBLAS GEMM for tensor roofs.

UNVERIFIED ON HARDWARE: no GPU was available where this was written. The kernels are proven offline (the
NVRTC/PTX tests); the timing and plateau code paths have never produced a number on a real GPU.

Ceiling names: ``L1``, ``L2``, ``HBM``; ``fp64``/``fp32``/``fp16``/``bf16`` from the ERT FMA kernel (CUDA
cores); ``<precision>_tensor`` from cuBLAS GEMM (fp64 on sm_80+, tf32, fp16, bf16, fp8 on sm_89+). TF32 and
FP8 exist only on tensor cores, so ``tf32`` and ``fp8`` are also set to their tensor roof.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from pytest_roofline.characterize import plateaus
from pytest_roofline.characterize.cpu_ert import working_set_sizes
from pytest_roofline.model import Machine

SIZES_PER_OCTAVE = 6
GEMM_SIZES = (4096, 8192)


def characterize_cuda(index: int, fingerprint_fields: dict[str, Any], progress: Callable[[str], None]) -> Machine:
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
    sizes = working_set_sizes(64 * 1024, largest, SIZES_PER_OCTAVE, 4096)
    points = ert.bandwidth_sweep(sizes, progress)

    aggregate_l1 = multiprocessors * l1_per_sm
    l1_high = min(0.5 * aggregate_l1, 0.25 * l2_bytes)
    windows = {"L1": (float(sizes[0]), l1_high), "L2": (2.0 * l1_high, 0.75 * l2_bytes),
               "HBM": (4.0 * l2_bytes, float(largest))}
    found = plateaus.extract_plateaus([p.working_set_bytes for p in points], [p.bandwidth for p in points], windows)
    bandwidth = {level: plateau.bytes_per_s for level, plateau in found.items()}
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

    gemm = _gemm_roofs(index, ert.arch, progress)
    for precision, (value, source) in gemm.items():
        peak_flops[f"{precision}_tensor"] = value
        sources[f"peak_flops.{precision}_tensor"] = source
        if precision in ("tf32", "fp8"):
            peak_flops[precision] = value
            sources[f"peak_flops.{precision}"] = source
    info = {"method": "ert-cuda", "sources": sources, "gemm_flops": {k: v for k, (v, _) in gemm.items()},
            "levels": {level: {"window_bytes": list(p.window), "points": p.points,
                               "plateau_bytes": [p.first_bytes, p.last_bytes]} for level, p in found.items()},
            "sweep": {"update": [p.to_row() for p in points], "flops": [p.to_row() for p in flop_points]},
            "launch": {"blocks": ert.blocks, "threads_per_block": ert.threads_per_block},
            "measure_seconds": time.perf_counter() - start, "unverified_on_hardware": True}
    return Machine(name=str(fingerprint_fields.get("gpu_name", f"cuda:{index}")), peak_flops=peak_flops,
                   bandwidth=bandwidth, info=info)


def _gemm_roofs(index: int, arch: int, progress: Callable[[str], None]) -> dict[str, tuple[float, str]]:
    """Best GEMM FLOP/s per precision through cuBLAS (torch when it has CUDA, else CuPy)."""
    try:
        import torch

        if torch.cuda.is_available():
            return _torch_gemm(torch, index, arch, progress)
    except ImportError:
        pass
    return _cupy_gemm(progress)


def _torch_gemm(torch: Any, index: int, arch: int, progress: Callable[[str], None]) -> dict[str, tuple[float, str]]:
    device = torch.device("cuda", index)
    dtypes = {"fp64": torch.float64, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    roofs: dict[str, tuple[float, str]] = {}
    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for precision, dtype in dtypes.items():
            if precision == "bf16" and arch < 80:
                continue
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
            best = 0.0
            for n in GEMM_SIZES:
                a = torch.randn(n, n, device=device).to(dtype)
                best = max(best, 2.0 * n**3 / _time_cuda(torch, functools.partial(torch.mm, a, a)))
            roofs[precision] = (best, "torch-cublas-gemm")
            progress(f"{precision} GEMM: {best / 1e12:.1f} TFLOP/s")
        if arch >= 89 and hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn"):
            best = 0.0
            for n in GEMM_SIZES:
                a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
                b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()
                one = torch.ones((), device=device)
                scaled = functools.partial(torch._scaled_mm, a, b, scale_a=one, scale_b=one,
                                           out_dtype=torch.bfloat16)
                best = max(best, 2.0 * n**3 / _time_cuda(torch, scaled))
            roofs["fp8"] = (best, "torch-scaled-mm")
            progress(f"fp8 GEMM: {best / 1e12:.1f} TFLOP/s")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous_tf32
    return roofs


def _time_cuda(torch: Any, run: Callable[[], Any], repeats: int = 5) -> float:
    run()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop) / 1e3)
    return best


def _cupy_gemm(progress: Callable[[str], None]) -> dict[str, tuple[float, str]]:
    import cupy

    roofs: dict[str, tuple[float, str]] = {}
    for precision, dtype in (("fp64", cupy.float64), ("fp16", cupy.float16)):
        best = 0.0
        for n in GEMM_SIZES:
            a = cupy.random.random((n, n)).astype(dtype)
            cupy.matmul(a, a)
            for _ in range(5):
                start, stop = cupy.cuda.Event(), cupy.cuda.Event()
                start.record()
                cupy.matmul(a, a)
                stop.record()
                stop.synchronize()
                best = max(best, 2.0 * n**3 / (cupy.cuda.get_elapsed_time(start, stop) / 1e3))
        roofs[precision] = (best, "cupy-cublas-gemm")
        progress(f"{precision} GEMM: {best / 1e12:.1f} TFLOP/s")
    return roofs
