"""Per-op GPU times from a Kineto trace: kernels joined to the ops that launched them by correlation id.

Plain Python over the Chrome-trace events ``torch.profiler`` exports (``prof.export_chrome_trace``), the shapes
Kineto writes (``ph: "X"``, ``ts``/``dur`` in microseconds):

* ``cat: "cpu_op"``: an op on a host thread (``name: "aten::mm"``, ``args["Input Dims"]``, ``args["External id"]``);
* ``cat: "cuda_runtime"`` (or ``"cuda_driver"``): the launch call (``cudaLaunchKernel``, ``cuLaunchKernel``),
  ``args["correlation"]``, on the thread of the op that made it, inside its time span;
* ``cat: "kernel"``, ``"gpu_memcpy"``, ``"gpu_memset"``: device activity with the launch's ``args["correlation"]``
  (and the launching op's ``args["External id"]``);
* ``cat: "user_annotation"``: our ``record_function("roofline.call")`` range around one call; the ops of every
  host thread inside its span belong to it (autograd's backward runs on a thread of its own on CUDA) (its device-side
  twin, ``gpu_user_annotation``, is ignored: it has no host children, and counting it as a call leaves every
  op call unmatched).

Each device event goes to the innermost ``cpu_op`` whose span holds its launch call on the same thread (the
correlation id is the link; ``External id`` names the same op and is used when the launch call is missing).
An op's time is then the device time of the kernels it and the ops inside it launched; an op with no device
activity anywhere below it keeps its host time (it ran on the CPU). Per call it also gives:

* ``kernel_s``: the sum of the device events' durations inside the call;
* ``busy_s``: the union of their intervals (overlapping streams counted once), so
  ``idle_share = 1 - busy_s / wall_s`` is the share of the call during which the GPU ran nothing of it: launch
  latency, Python and dispatch between kernels;
* ``launch_s`` and ``launches``: the host time spent in the launch calls, and their number.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from pytest_roofline.model.op_trace import ProfiledEvent

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
CALL_RANGE = "roofline.call"

# The Chrome-trace fields read here, as ``export_chrome_trace`` writes them (json.load gives them untyped).
TraceArgs = TypedDict("TraceArgs", {"Input Dims": list[object], "External id": int, "correlation": int},
                      total=False)


class TraceEvent(TypedDict, total=False):
    ph: str
    cat: str
    name: str
    ts: float
    dur: float
    tid: int | str  # a thread id, or a name such as "stream 7" for device events
    args: TraceArgs


class Trace(TypedDict, total=False):
    traceEvents: list[TraceEvent]


@dataclass
class _Op:
    name: str
    shapes: tuple[object, ...]
    tid: int | str | None
    start: float
    end: float
    host_s: float
    children: list[_Op]
    device_s: float = 0.0  # own device activity (not the children's)
    has_device: bool = False


@dataclass(frozen=True)
class KinetoCall:
    """One ``roofline.call`` range: its op trees (times: device time, or host time without device work)."""

    roots: list[ProfiledEvent]
    wall_s: float
    kernel_s: float
    busy_s: float
    launch_s: float
    launches: int

    @property
    def idle_share(self) -> float:
        return max(0.0, 1.0 - self.busy_s / self.wall_s) if self.wall_s > 0 else 0.0


def _complete(events: Iterable[TraceEvent]) -> list[TraceEvent]:
    return [e for e in events if e.get("ph") == "X" and "ts" in e and "dur" in e]


def _union_s(intervals: Sequence[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total * 1e-6


def _trees(ops: list[_Op]) -> list[_Op]:
    """Nest the ops of one thread by time containment (a parent starts no later and ends no earlier)."""
    roots: list[_Op] = []
    stack: list[_Op] = []
    for op in sorted(ops, key=lambda o: (o.start, -o.end)):
        while stack and op.start >= stack[-1].end:
            stack.pop()
        (stack[-1].children if stack else roots).append(op)
        stack.append(op)
    return roots


def _innermost(ops: Sequence[_Op], starts: Sequence[float], ts: float) -> _Op | None:
    """The innermost op (of one thread's, sorted by start; ``starts`` their starts) whose span holds ``ts``:
    ops nest, so it is the latest-starting one that has not ended by ``ts``. Searched backwards from ``ts``:
    a launch's own op began just before it, so this stops within a few ops (a trace holds 10^5 of them)."""
    for index in range(bisect.bisect_right(starts, ts) - 1, -1, -1):
        if ops[index].end >= ts:
            return ops[index]
    return None


def _convert(op: _Op) -> tuple[ProfiledEvent, bool]:
    children = [_convert(child) for child in op.children]
    has_device = op.has_device or any(flag for _, flag in children)
    device = op.device_s + sum(event.time_s for event, flag in children if flag)
    time_s = device if has_device else op.host_s
    return ProfiledEvent(op.name, op.shapes, time_s, tuple(event for event, _ in children)), has_device


def calls_from_trace(trace: Trace | Sequence[TraceEvent]) -> list[KinetoCall]:
    """Every ``roofline.call`` range of a Chrome trace (the dict ``export_chrome_trace`` writes, or its
    ``traceEvents`` list), in start order, with its ops' device times joined by correlation id."""
    events = _complete(trace.get("traceEvents", []) if isinstance(trace, Mapping) else trace)
    ops = [_Op(str(e["name"]), tuple((e.get("args") or {}).get("Input Dims") or ()), e.get("tid"),
               float(e["ts"]), float(e["ts"]) + float(e["dur"]), float(e["dur"]) * 1e-6, [])
           for e in events if e.get("cat") == "cpu_op"]
    by_tid: dict[int | str | None, list[_Op]] = {}
    for op in sorted(ops, key=lambda o: o.start):
        by_tid.setdefault(op.tid, []).append(op)
    starts = {tid: [o.start for o in ops_of] for tid, ops_of in by_tid.items()}
    by_external: dict[int | None, _Op] = {}  # looked up with a kernel's id, which it may lack
    for e, op in zip((e for e in events if e.get("cat") == "cpu_op"), ops):
        external = (e.get("args") or {}).get("External id")
        if external is not None:
            by_external.setdefault(external, op)
    launches = {(e.get("args") or {}).get("correlation"): e for e in events if e.get("cat") in LAUNCH_CATS}
    device = [e for e in events if e.get("cat") in DEVICE_CATS]
    keyed: list[tuple[float, TraceEvent, TraceEvent | None]] = []  # (instant, event, launch)
    for kernel in device:
        args = kernel.get("args") or {}
        launch = launches.get(args.get("correlation"))
        owner = None
        if launch is not None:
            tid = launch.get("tid")
            owner = _innermost(by_tid.get(tid, []), starts.get(tid, []), float(launch["ts"]))
        if owner is None:
            owner = by_external.get(args.get("External id"))
        if owner is not None:
            owner.device_s += float(kernel["dur"]) * 1e-6
            owner.has_device = True
        # a device event belongs to the call its launch (else its owning op) started in
        if launch is not None:
            keyed.append((float(launch["ts"]), kernel, launch))
        elif owner is not None:
            keyed.append((owner.start, kernel, None))
    keyed.sort(key=lambda item: item[0])
    instants = [item[0] for item in keyed]
    calls = []
    ranges = sorted((e for e in events if e.get("cat") == "user_annotation" and e.get("name") == CALL_RANGE),
                    key=lambda e: float(e["ts"]))
    for call in ranges:
        start, end = float(call["ts"]), float(call["ts"]) + float(call["dur"])
        # Every thread's ops inside the call: on CUDA, autograd runs the backward pass on a device thread.
        roots = sorted((root for tid, ops_of in by_tid.items()
                        for root in _trees([o for o in ops_of[bisect.bisect_left(starts[tid], start):
                                                              bisect.bisect_right(starts[tid], end)]
                                            if o.end <= end])),
                       key=lambda o: o.start)
        mine = [(kernel, launch) for _, kernel, launch in
                keyed[bisect.bisect_left(instants, start):bisect.bisect_right(instants, end)]]
        calls.append(KinetoCall(
            roots=[_convert(root)[0] for root in roots],
            wall_s=(end - start) * 1e-6,
            kernel_s=sum(float(k["dur"]) for k, _ in mine) * 1e-6,
            busy_s=_union_s([(float(k["ts"]), float(k["ts"]) + float(k["dur"])) for k, _ in mine]),
            launch_s=sum(float(launch["dur"]) for _, launch in mine if launch is not None) * 1e-6,
            launches=len(mine),  # device events of the call (kernels, copies, sets)
        ))
    return calls
