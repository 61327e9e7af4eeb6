"""The per-op timing pass: the call run again under ``torch.profiler``, apart from the bare timed loop.

The bare loop sets the verdict; this pass only says where the time went. Each profiled call is wrapped in a
``record_function`` range of its own, so its events form one tree per call; the events are converted to
plain :class:`~pytest_roofline.model.op_trace.ProfiledEvent` trees for :mod:`pytest_roofline.measure.ops.join`.

- CPU: ``ProfilerActivity.CPU``; an event's time is its inclusive CPU time (the op and what it calls).
- CUDA: ``ProfilerActivity.CUDA`` too (Kineto/CUPTI). The trace is exported (Chrome-trace JSON) and each
  kernel is joined to the op that launched it through its correlation id
  (:mod:`pytest_roofline.measure.ops.kineto`): an op's time is the GPU time of the kernels it and the ops inside
  it launched, or its host time when none (a CPU op in a process that uses CUDA). Per call it also keeps the
  kernels' time, the GPU's busy time (union of kernel intervals) and the host time of the launch calls.
  The join is tested on a constructed trace with Kineto's event shapes; it has not run on a GPU here.

The profiler's overhead is recorded: wall time of a profiled call (synchronized) over that of a bare call
made just before it (median over the pairs).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_roofline.host.quiet_stderr import profiler_stderr
from pytest_roofline.measure.ops.kineto import calls_from_trace
from pytest_roofline.model.op_trace import ProfiledEvent

if TYPE_CHECKING:
    import torch.profiler
    from torch.autograd.profiler_util import FunctionEvent

    from pytest_roofline.measure.ops.kineto import KinetoCall

CALL_RANGE = "roofline.call"
MIN_CALLS = 3  # per-op medians over at least three calls: one disturbed call does not set an op's time
MAX_CALLS = 5
DISPATCH_CALLS = 200


@dataclass(frozen=True)
class ProfiledCalls:
    calls: list[list[ProfiledEvent]]  # per profiled call, its top-level events
    wall_s: list[float]  # wall time of each profiled call
    device: str  # "cpu" or "cuda": which clock the event times are
    bare_s: list[float] = field(default_factory=list)  # a bare call just before each profiled one
    gpu: list[KinetoCall] = field(default_factory=list)  # per profiled call (CUDA only)


def calls_for(median_s: float, budget_s: float) -> int:
    """How many calls to profile (each after a bare one): as many pairs as fit half the time budget, 3 to 5; one
    when a pair does not fit the whole budget (a call longer than half of it stays bounded: one more pair)."""
    if median_s <= 0:
        return MAX_CALLS
    if 2 * median_s > budget_s:
        return 1
    return max(MIN_CALLS, min(MAX_CALLS, int(0.5 * budget_s / (2 * median_s))))


def _event_time_s(event: FunctionEvent, device: str) -> float:
    if device == "cuda":
        total = getattr(event, "device_time_total", None)
        if total is None:  # older PyTorch
            total = getattr(event, "cuda_time_total", None)
        return float(total or 0.0) * 1e-6
    return float(event.cpu_time_total) * 1e-6


def convert(event: FunctionEvent, device: str) -> ProfiledEvent:
    """A ``torch.autograd.profiler_util.FunctionEvent`` (and its CPU children) as a plain event."""
    children = sorted(event.cpu_children, key=lambda e: e.time_range.start)
    return ProfiledEvent(str(event.name), tuple(event.input_shapes or ()), _event_time_s(event, device),
                         tuple(convert(child, device) for child in children))


def call_trees(events: Iterable[FunctionEvent], device: str) -> list[list[ProfiledEvent]]:
    """The children of every ``roofline.call`` range, one list per call, in start order."""
    ranges = sorted((e for e in events if e.name == CALL_RANGE and e.cpu_parent is None),
                    key=lambda e: e.time_range.start)
    return [[convert(child, device) for child in sorted(r.cpu_children, key=lambda e: e.time_range.start)]
            for r in ranges]


def profile_calls(
    fn: Callable[..., object], args: tuple[object, ...], kwargs: Mapping[str, object], *, calls: int,
    prepare: Callable[[], tuple[tuple[object, ...], dict[str, object]]], synchronize: Callable[[], None],
    device: str = "cpu", before_call: Callable[[float], object] | None = None,
) -> ProfiledCalls:
    """Run ``fn`` ``calls`` times under the profiler, each right after one bare call (timed too): the pair
    sees the same moment of a busy host, so the profiler's overhead and the coverage are not a comparison
    with a measurement taken seconds earlier. ``prepare`` gives each call its arguments, untimed.

    ``before_call`` (the bare loop's DRAM probe schedule, given the previous call's time) runs before each
    call, outside its interval, so every call starts from the cache state the timed ones started from."""
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    walls: list[float] = []
    bares: list[float] = []
    trees: list[list[ProfiledEvent]] = []
    gpu: list[KinetoCall] = []
    for _ in range(calls):
        if before_call is not None:
            before_call(walls[-1] if walls else 0.0)
        call_args, call_kwargs = prepare()
        synchronize()
        start = time.perf_counter()
        fn(*call_args, **call_kwargs)
        synchronize()
        bares.append(time.perf_counter() - start)
        if before_call is not None:
            before_call(bares[-1])
        call_args, call_kwargs = prepare()
        with profiler_stderr(), profile(activities=activities, record_shapes=True) as prof:
            synchronize()
            start = time.perf_counter()
            with record_function(CALL_RANGE):
                fn(*call_args, **call_kwargs)
                synchronize()
            walls.append(time.perf_counter() - start)
        if device == "cuda":
            calls_here = kineto_calls(prof)
            gpu.extend(calls_here)
            trees.extend(call.roots for call in calls_here)
        else:
            trees.extend(call_trees(prof.events(), device))
    return ProfiledCalls(trees, walls, device, bares, gpu)


def kineto_calls(prof: torch.profiler.profile) -> list[KinetoCall]:
    """The ``roofline.call`` ranges of a finished CUDA profile, joined by correlation id (op_kineto)."""
    import json
    import os
    import tempfile

    handle, path = tempfile.mkstemp(suffix=".json", prefix="roofline-kineto-")
    os.close(handle)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as file:
            return calls_from_trace(json.load(file))
    finally:
        os.unlink(path)


def dispatch_cost_s(device: str = "cpu") -> float:
    """The profiler's time of the cheapest op call there is (an add of two 1-element tensors): what any op
    pays before it does work. An op within a few times of it is too small to reach any roof."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    a = torch.ones(1, device=device)
    b = torch.ones(1, device=device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profiler_stderr(), profile(activities=activities) as prof:
        for _ in range(DISPATCH_CALLS):
            torch.add(a, b)
    times = [_event_time_s(e, "cpu") for e in prof.events() if e.name == "aten::add"]
    return statistics.median(times) if times else 0.0
