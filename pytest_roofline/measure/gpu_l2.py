"""Whether a GPU call site's timed calls start with a warm or a flushed L2 (``--roofline-gpu-l2``).

Back to back, a kernel finds in L2 what the previous call left there: a working set smaller than the L2 (50 MiB
on an H100) is read from it, and one a little larger partly so. Where the bytes are judged against HBM's roof,
that overstates the bandwidth reached (Triton's and FlashInfer's benchmarks flush L2 for this reason), and
ncu's counts are cold-cache counts: it flushes every cache before each replay pass (``--cache-control all``,
``counters/ncu/command.py``). So, by default (``auto``), a call site is timed with its L2 flushed when its counts
come from ncu or when the roof that binds it is main memory's; a working set the placement gives to L2 is timed
warm, as it runs in a model step. ``flush`` and ``warm`` hold for every GPU call site. The flush writes a
buffer twice the L2's size after the call's untimed setup and before its timed interval (the timer starts after
a device synchronization). A flushed call site's bytes are judged where they were counted (main memory), not
placed in the L2 it found empty. CPU call sites are never flushed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

GPU_L2_MODES = ("auto", "flush", "warm")
FLUSHED, WARM, MIXED = "flushed", "warm", "mixed"
FLUSHED_NOTE = "GPU L2 flushed before each timed call (--roofline-gpu-l2)"
WARM_NOTE = "GPU L2 warm: each timed call follows the last (--roofline-gpu-l2)"
UNFLUSHABLE_NOTE = ("GPU L2 warm: a flush was wanted (--roofline-gpu-l2), but torch has no buffer on this GPU to "
                    "flush it with (CUDA not initialized by torch, no L2 size, or no memory left)")
PAIRED_NOTE = ("GPU L2 warm: an A/B pair's turns run back to back on both sides (--roofline-gpu-l2 holds for "
               "call sites timed alone)")


def wants_flush(mode: str, cold_counts: bool, bound: str, main_level: str) -> bool:
    """Whether a GPU call site is timed with its L2 flushed. ``cold_counts``: its bytes come from a counter
    that counts with cold caches (ncu); ``bound``: the roof that binds its placed work (``memory:HBM``,
    ``compute:fp16_tensor``, "" when unknown); ``main_level``: main memory's level (``HBM``)."""
    if mode not in GPU_L2_MODES:
        raise ValueError(f"--roofline-gpu-l2: {mode!r} is not one of {', '.join(GPU_L2_MODES)}")
    if mode != "auto":
        return mode == "flush"
    return cold_counts or bound == f"memory:{main_level}"


# Writes twice a GPU's L2 (``torch_flush``): ``measure.timing.time_callable``'s ``flush``.
L2Flush = Callable[[], object]


@dataclass(frozen=True)
class L2Plan:
    """How a call site's timed calls find the GPU's L2: the flush run before each (None: none), what its record
    says (``flushed``, ``warm``; None for a CPU call site) and its note."""

    flush: L2Flush | None = None
    state: str | None = None
    note: str | None = None

    @property
    def flushed(self) -> bool:
        return self.state == FLUSHED


ON_CPU = L2Plan()
KEPT_WARM = L2Plan(None, WARM, WARM_NOTE)


def plan(wanted: bool, flush: L2Flush | None) -> L2Plan:
    """A GPU call site's plan: flushed where a flush was wanted and there is one."""
    if not wanted:
        return KEPT_WARM
    return L2Plan(flush, FLUSHED, FLUSHED_NOTE) if flush is not None else L2Plan(None, WARM, UNFLUSHABLE_NOTE)


def paired(on_gpu: bool) -> L2Plan:
    """An A/B pair's turns at a call site: warm on both sides (the twins do not flush); nothing on a CPU."""
    return L2Plan(None, WARM, PAIRED_NOTE) if on_gpu else ON_CPU


def mixed(plans: Sequence[L2Plan]) -> L2Plan:
    """The plan of call sites judged as one (ncu's, ``Recorder.judge_pending``): theirs where they agree."""
    states = {p.state for p in plans}
    if len(states) <= 1:
        return plans[0] if plans else ON_CPU
    return L2Plan(None, MIXED, "GPU L2 flushed before the timed calls of some of its call sites only "
                               "(--roofline-gpu-l2)")


def torch_flush(cache: dict[int, L2Flush], index: int) -> L2Flush | None:
    """The flush for CUDA device ``index``, built once per device into ``cache`` (a buffer of twice its L2, held
    for the session); None where torch has not initialized CUDA (the work is not torch's: nothing here can write
    the GPU's memory), reports no L2, or cannot allocate the buffer."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    if index not in cache:
        if not 0 <= index < torch.cuda.device_count():
            return None
        l2_bytes = int(getattr(torch.cuda.get_device_properties(index), "L2_cache_size", 0) or 0)
        if l2_bytes <= 0:
            return None
        try:
            buffer = torch.empty(2 * l2_bytes, dtype=torch.uint8, device=f"cuda:{index}")
        except RuntimeError:  # out of memory or a CUDA error: timed warm, and its note says why
            return None
        cache[index] = buffer.zero_
    return cache[index]
