"""Roofs from libraries alone: DRAM bandwidth from a large triad, peaks from BLAS/torch GEMM.

Used as the quick first characterization and as the fallback when no C compiler is present. It cannot see
the cache levels honestly (per-call overhead hides them), so it reports DRAM only.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_roofline.characterize.timing import best_seconds

GEMM_SIZES = (1024, 2048)  # two sizes: small ones win on cache-bound BLAS, large ones amortize overhead


@dataclass
class Roof:
    value: float
    source: str
    detail: dict[str, Any] = field(default_factory=dict)


def _torch() -> Any | None:
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    return torch


def dram_triad(last_level_cache_bytes: int, progress: Callable[[str], None]) -> Roof:
    """a = b + s*c over three arrays 4x the last-level cache together; 24 bytes per fp64 element requested."""
    total = max(4 * last_level_cache_bytes, 192 * 1024**2)
    n = total // (3 * 8)
    torch = _torch()
    if torch is not None:
        a = torch.zeros(n, dtype=torch.float64)
        b = torch.ones(n, dtype=torch.float64)
        c = torch.ones(n, dtype=torch.float64)
        seconds = best_seconds(lambda: torch.add(b, c, alpha=3.0, out=a), warmup=2, min_repeats=5, budget_s=0.4)
        source = "torch-triad"
    else:
        a_np, b_np, c_np = np.zeros(n), np.ones(n), np.ones(n)
        # numpy has no fused triad; a + b is one pass with the same 2 reads + 1 write per element.
        seconds = best_seconds(lambda: np.add(b_np, c_np, out=a_np), warmup=2, min_repeats=5, budget_s=0.4)
        source = "numpy-add"
    rate = 3 * 8 * n / seconds
    progress(f"DRAM {source}: {rate / 1e9:.1f} GB/s over {3 * 8 * n / 2**20:.0f} MiB")
    return Roof(rate, source, {"working_set_bytes": 3 * 8 * n})


def numpy_gemm(dtype: str, progress: Callable[[str], None]) -> Roof:
    best_rate, best_n = 0.0, 0
    for n in GEMM_SIZES:
        a = np.random.default_rng(0).random((n, n)).astype(dtype)
        b = a.copy()
        out = np.empty_like(a)
        seconds = best_seconds(functools.partial(np.matmul, a, b, out=out), warmup=1, min_repeats=2, budget_s=0.25)
        if 2 * n**3 / seconds > best_rate:
            best_rate, best_n = 2 * n**3 / seconds, n
    precision = {"float64": "fp64", "float32": "fp32"}[dtype]
    progress(f"{precision} numpy GEMM: {best_rate / 1e9:.1f} GFLOP/s (n={best_n})")
    return Roof(best_rate, "numpy-gemm", {"n": best_n})


def torch_gemm(precision: str, progress: Callable[[str], None]) -> Roof | None:
    """torch.mm for a precision numpy lacks (bf16, fp16); None without torch or when it fails."""
    torch = _torch()
    if torch is None:
        return None
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64}[precision]
    best_rate, best_n = 0.0, 0
    for n in GEMM_SIZES:
        try:
            a = torch.randn(n, n).to(dtype)
            b = a.clone()
            out = torch.empty_like(a)
            seconds = best_seconds(functools.partial(torch.mm, a, b, out=out), warmup=2, min_repeats=3, budget_s=0.25)
        except RuntimeError as error:  # some builds lack a CPU kernel for a dtype
            progress(f"{precision} torch.mm unavailable: {error}")
            return None
        if 2 * n**3 / seconds > best_rate:
            best_rate, best_n = 2 * n**3 / seconds, n
    progress(f"{precision} torch GEMM: {best_rate / 1e9:.1f} GFLOP/s (n={best_n})")
    return Roof(best_rate, "torch-gemm", {"n": best_n})
