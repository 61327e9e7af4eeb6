"""Whether a GPU call site's timed calls start with a warm or a flushed L2 (``--roofline-gpu-l2``).

Back to back, a kernel finds in L2 what the previous call left there: a working set smaller than the L2 (50 MiB
on an H100) is read from it, and one a little larger partly so. Where the bytes are judged against HBM's roof,
that overstates the bandwidth reached (Triton's and FlashInfer's benchmarks flush L2 for this reason), and
ncu's counts are cold-cache counts: it flushes every cache before each replay pass (``--cache-control all``,
``counters/ncu/command.py``). So, by default (``auto``), a call site is timed with its L2 flushed when its counts
come from ncu or when the roof that binds it is main memory's; a working set the placement gives to L2 is timed
warm, as it runs in a model step. ``flush`` and ``warm`` hold for every GPU call site. The flush writes a
buffer twice the L2's size before each timed call, outside its timed interval (the timer starts after a device
synchronization). CPU call sites are never flushed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

GPU_L2_MODES = ("auto", "flush", "warm")
FLUSHED, WARM = "flushed", "warm"
NOTES = {FLUSHED: "GPU L2 flushed before each timed call (--roofline-gpu-l2)",
         WARM: "GPU L2 warm: each timed call follows the last (--roofline-gpu-l2)"}


def l2_note(state: str | None) -> list[str]:
    """The region's note on its L2 (none for a CPU call site)."""
    return [NOTES[state]] if state else []


def wants_flush(mode: str, cold_counts: bool, bound: str, main_level: str) -> bool:
    """Whether a GPU call site is timed with its L2 flushed. ``cold_counts``: its bytes come from a counter
    that counts with cold caches (ncu); ``bound``: the roof that binds its placed work (``memory:HBM``,
    ``compute:fp16_tensor``, "" when unknown); ``main_level``: main memory's level (``HBM``)."""
    if mode not in GPU_L2_MODES:
        raise ValueError(f"--roofline-gpu-l2: {mode!r} is not one of {', '.join(GPU_L2_MODES)}")
    if mode != "auto":
        return mode == "flush"
    return cold_counts or bound == f"memory:{main_level}"


@dataclass(frozen=True)
class L2Flush:
    """Writes ``size`` bytes on the GPU (twice its L2) before a timed call: the hook
    ``measure.timing.time_callable`` calls as ``before_timed_call``."""

    write: Callable[[], object]
    size: int

    def __call__(self, previous_s: float) -> bool:
        self.write()
        return False  # the flush evicts the call's data on purpose: no untimed call puts it back


def torch_flush(cache: dict[int, L2Flush]) -> L2Flush | None:
    """The flush for torch's current CUDA device, built once per device into ``cache``; None where torch has not
    initialized CUDA (the work is not torch's: nothing here can write the GPU's memory) or reports no L2."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    index = int(torch.cuda.current_device())
    if index not in cache:
        l2_bytes = int(getattr(torch.cuda.get_device_properties(index), "L2_cache_size", 0) or 0)
        if l2_bytes <= 0:
            return None
        buffer = torch.empty(2 * l2_bytes, dtype=torch.uint8, device=f"cuda:{index}")
        cache[index] = L2Flush(buffer.zero_, 2 * l2_bytes)
    return cache[index]
