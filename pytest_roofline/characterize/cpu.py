"""CPU characterization: which measurements run, and how their results become a Machine."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pytest_roofline.characterize import blas_probe
from pytest_roofline.characterize.caches import os_cache_sizes
from pytest_roofline.model import Machine


def characterize_cpu(fingerprint_fields: dict[str, Any], progress: Callable[[str], None]) -> Machine:
    start = time.perf_counter()
    caches = os_cache_sizes()
    last_level = caches[max(caches)] if caches else 32 * 1024**2
    sources: dict[str, str] = {}
    details: dict[str, Any] = {}

    bandwidth: dict[str, float] = {}
    triad = blas_probe.dram_triad(last_level, progress)
    bandwidth["DRAM"] = triad.value
    sources["bandwidth.DRAM"] = triad.source
    details["DRAM"] = triad.detail

    peak_flops: dict[str, float] = {}
    gemm: dict[str, float] = {}
    for precision, dtype in (("fp64", "float64"), ("fp32", "float32")):
        roof = blas_probe.numpy_gemm(dtype, progress)
        peak_flops[precision] = gemm[precision] = roof.value
        sources[f"peak_flops.{precision}"] = roof.source
    for precision in ("bf16", "fp16"):
        torch_roof = blas_probe.torch_gemm(precision, progress)
        if torch_roof is not None:
            peak_flops[precision] = gemm[precision] = torch_roof.value
            sources[f"peak_flops.{precision}"] = torch_roof.source

    info: dict[str, Any] = {
        "method": "blas",
        "sources": sources,
        "gemm_flops": gemm,
        "details": details,
        "threads": fingerprint_fields.get("threads"),
        "torch_threads": fingerprint_fields.get("torch_threads"),
        "cache_sizes": fingerprint_fields.get("cache_sizes"),
        "measure_seconds": time.perf_counter() - start,
    }
    name = f"{fingerprint_fields.get('cpu_model', 'cpu')} ({fingerprint_fields.get('core_count', '?')} cores)"
    return Machine(name=name, peak_flops=peak_flops, bandwidth=bandwidth, info=info)
