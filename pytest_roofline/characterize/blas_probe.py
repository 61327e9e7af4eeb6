"""Roofs from libraries alone: DRAM bandwidth from a large triad, peaks from BLAS/torch GEMM.

Used as the quick first characterization and as the fallback when no C compiler is present. It cannot see
the cache levels honestly (per-call overhead hides them), so it reports DRAM only.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_roofline.characterize.timing import best_seconds

# GEMM sizes per precision: BLAS and AMX efficiency still grow past 2048 for the cheap types.
GEMM_SIZES: dict[str, tuple[int, ...]] = {"fp64": (1024, 2048), "fp32": (1024, 2048),
                                          "bf16": (1024, 2048, 4096), "fp16": (1024,)}


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


def gemm(precision: str, progress: Callable[[str], None], sizes: tuple[int, ...] | None = None) -> Roof | None:
    """The best GEMM FLOP/s for ``precision`` over numpy (fp64/fp32) and torch.mm, over several sizes."""
    best: Roof | None = None
    for n in sizes or GEMM_SIZES[precision]:
        for backend, rate in _gemm_rates(precision, n):
            if best is None or rate > best.value:
                best = Roof(rate, f"{backend}-gemm", {"n": n})
    if best is not None:
        progress(f"{precision} GEMM: {best.value / 1e9:.1f} GFLOP/s ({best.source}, n={best.detail['n']})")
    return best


def _gemm_rates(precision: str, n: int) -> list[tuple[str, float]]:
    rates = []
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if precision in ("fp64", "fp32"):
        a = np.random.default_rng(0).random((n, n)).astype("float64" if precision == "fp64" else "float32")
        out = np.empty_like(a)
        seconds = best_seconds(functools.partial(np.matmul, a, a, out=out), warmup=1, min_repeats=3, budget_s=0.25,
                               threads=threads)
        rates.append(("numpy", 2.0 * n**3 / seconds))
    torch = _torch()
    if torch is not None:
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64}
        try:
            t = torch.randn(n, n).to(dtype[precision])
            out_t = torch.empty_like(t)
            seconds = best_seconds(functools.partial(torch.mm, t, t, out=out_t), warmup=1, min_repeats=3,
                                   budget_s=0.25, threads=min(threads, torch.get_num_threads()))
            rates.append(("torch", 2.0 * n**3 / seconds))
        except RuntimeError:  # a build without a CPU kernel for this dtype
            pass
    return rates
