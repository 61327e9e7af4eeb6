"""Make glibc's malloc behave the same way in every timed call.

glibc serves large blocks (above a *dynamic* mmap threshold) with fresh mmap'd pages and trims freed heap
memory back to the OS. A tensor op that allocates a megabyte-sized output then page-faults on every call
or on none, depending on the history of earlier allocations: measured here, a 64->64 3x3 convolution on an
8x64x28x28 input took 6.1 ms in one heap state and 3.7 ms in the other, in the same process. Fixing both
thresholds (as tcmalloc/jemalloc setups do for PyTorch on CPU) removes that history dependence.

Thresholds alone cannot cover blocks above glibc's largest mmap threshold (32 MiB on 64-bit): those are
always mmap'd, so a step with such a buffer faults on every page of it on every call (the example suite's
ASPP forward+backward: 62,210 faults per call, fraction 0.53 instead of 0.67). ``M_MMAP_MAX = 0`` turns
mmap off for malloc, so they come from the heap too and are reused, as smaller blocks are.

What the thresholds do not fix (measured in fresh processes, glibc 2.36, PyTorch 2.13, tuned thresholds, no
trimming and no munmap seen under strace): PyTorch allocates with posix_memalign(64), which asks malloc for
the size plus the alignment, so a freed output is a few bytes too small for the next same-sized output
until the small blocks around it are freed too and it coalesces. Until then every call takes fresh heap
(mallinfo2: free bytes grow by 8 MiB a call, top chunk 0) and first-touches it. An 8 MiB add went
2073, 0, then 2048 faults for seven calls in 5 of 8 processes, then never again; a 768x1024x768 matmul did
the same (562-577 faults for eight calls) in 3 of 8. A single fault-free call is therefore not steady
state: the timing loop's warm-up waits for ``quiet_warmup`` fault-free calls in a row.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest allowed value on 64-bit
TRIM_THRESHOLD = 1 << 30


def tune_malloc() -> str | None:
    """Fix glibc's mmap and trim thresholds and serve every block from the heap; return what was done, or
    None where it does not apply."""
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other C libraries have no mallopt
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    settings = ((_M_MMAP_THRESHOLD, MMAP_THRESHOLD), (_M_TRIM_THRESHOLD, TRIM_THRESHOLD), (_M_MMAP_MAX, 0))
    if not all(mallopt(param, value) == 1 for param, value in settings):
        return None
    return (f"glibc mallopt: M_MMAP_THRESHOLD={MMAP_THRESHOLD}, M_TRIM_THRESHOLD={TRIM_THRESHOLD}, "
            "M_MMAP_MAX=0")
