"""A turn on a GPU (docs/ab-compare.md, "CUDA"): each call of the turn between two CUDA events on this process's
current stream, the host synchronized once at the end of the turn, before the other side's turn starts.

Each side of a process pair is its own process, so it owns its CUDA context and streams; the events time only
the device work of its own calls (a setup step's device work is queued before the start event), and the host
sync between turns keeps one side's kernels from overlapping the other's. Built and tested offline with a fake
``torch.cuda``; not run on a GPU yet.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

Runner = Callable[[Any, int, bool], tuple[float, int]]


def event_runner(cuda: Any = None) -> Runner | None:
    """A ``run_batch`` that times with CUDA events, when torch's CUDA is in use in this process; else None."""
    if cuda is None:
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        if cuda is None or not cuda.is_available() or not cuda.is_initialized():
            return None

    def run(calls: Any, batch: int, rewarm: bool = False) -> tuple[float, int]:
        return run_batch_events(calls, batch, rewarm, cuda)

    return run


def run_batch_events(calls: Any, batch: int, rewarm: bool, cuda: Any) -> tuple[float, int]:
    """``batch`` calls of ``calls`` (a ``timing._Calls``), each between two events; seconds per call (device
    time) and host page faults per call. ``rewarm``: one untimed call first, as on the CPU."""
    if rewarm:
        calls.run()
    cuda.synchronize()  # nothing of the other side's turn or of the re-warm is left in flight
    minor0, major0 = calls.faults()
    marks = []
    for _ in range(batch):
        args, kwargs = calls.arguments()
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        start.record()
        calls.fn(*args, **kwargs)
        end.record()
        marks.append((start, end))
    cuda.synchronize()  # the host waits for the turn's last kernel before the other side's turn
    minor1, major1 = calls.faults()
    milliseconds = sum(start.elapsed_time(end) for start, end in marks)
    return milliseconds / 1e3 / batch, (minor1 - minor0 + major1 - major0) // batch
