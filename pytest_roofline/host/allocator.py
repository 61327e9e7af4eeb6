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

Fault-free is not yet the same speed in every session: on 4 KiB pages each process gets other physical
pages, and so other cache-set conflicts, for the same tensors: a memory-bound add's fraction spread about
three times wider between sessions on 4 KiB pages than with PyTorch's huge-page allocation
(``THP_MEM_ALLOC_ENABLE=1``: blocks of 2 MiB and more are 2 MiB-aligned and ``madvise(MADV_HUGEPAGE)``;
docs/noise.md has the sessions). ``enable_torch_thp`` asks for it where the kernel allows huge pages on request.
PyTorch reads the variable once, at its first CPU allocation, so it is set before conftest files load.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Container, MutableMapping
from pathlib import Path

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


THP_ENV = "THP_MEM_ALLOC_ENABLE"
THP_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def thp_mode(setting: Path = THP_SETTING) -> str | None:
    """The kernel's transparent huge page mode (``always``, ``madvise`` or ``never``), None where unknown."""
    try:
        text = setting.read_text()
    except OSError:
        return None
    chosen = [word[1:-1] for word in text.split() if word.startswith("[") and word.endswith("]")]
    return chosen[0] if chosen else None


def enable_torch_thp(environ: MutableMapping[str, str] = os.environ, modules: Container[str] = sys.modules,
                     setting: Path = THP_SETTING) -> str:
    """Ask PyTorch's CPU allocator for huge pages (``THP_MEM_ALLOC_ENABLE=1``) where the kernel grants them
    on request; return what was done, for the session record. A value the user set is left alone."""
    mode = thp_mode(setting)
    if mode not in ("always", "madvise"):
        return f"4 KiB pages (transparent huge pages: {mode or 'not available'})"
    if THP_ENV in environ:
        return f"{THP_ENV}={environ[THP_ENV]} (set by the user; THP {mode})"
    environ[THP_ENV] = "1"
    note = f"{THP_ENV}=1 (THP {mode}: PyTorch blocks of 2 MiB and more on huge pages)"
    if "torch" in modules:  # PyTorch latches the variable at its first allocation, which may be past
        note += ("; torch was imported before the plugin could set it, so it may not apply: set "
                 f"{THP_ENV}=1 in the environment")
    return note


HUGE_PAGE_BYTES = 2 * 1024 * 1024
_MADV_HUGEPAGE = 14  # Linux, every architecture


def advise_huge_pages(address: int, length: int) -> bool:
    """``madvise(MADV_HUGEPAGE)`` on a range not touched yet, so its first touch maps 2 MiB pages where the
    kernel's THP mode allows it (``always`` or ``madvise``); False where it cannot be asked."""
    if not sys.platform.startswith("linux") or thp_mode() not in ("always", "madvise"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
    except (OSError, AttributeError):
        return False
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return bool(madvise(address, length, _MADV_HUGEPAGE) == 0)
