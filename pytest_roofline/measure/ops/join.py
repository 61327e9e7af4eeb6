"""Join a profiler's per-op times to the analytic counter's ops: by order, op name and input shapes.

Plain Python. The counter saw the ops that reached PyTorch's Python dispatch key, in order (forward and
autograd's backward alike); the profiler saw a tree of events for the same call made again: wrappers the
counter never sees (``aten::conv2d`` around ``aten::convolution``, autograd's ``evaluate_function`` nodes),
the op itself, and the ops it calls inside (``aten::mkldnn_convolution``, ``aten::empty``).

Matching, for each counted op in order:

1. the profiler's events are walked in pre-order (a parent before its children, start order), from just
   after the previous match;
2. the first event with the counted op's name (``aten::mm``) and the same input shapes matches: the shapes
   of its single-tensor arguments in order; 0-d tensors, non-tensor arguments and tensor lists are left out
   on both sides (the profiler records no shapes for tensor lists, so ``aten::cat`` matches by name and
   order alone);
3. the walk then jumps past that event's children: an op the counter saw never ran inside another op it
   saw (the dispatch mode is off inside an op), so nothing inside a match may match a later op;
4. guard against one missing op swallowing the rest: if the next counted op matches an event that ends
   *before* the candidate, this op is taken as missing (unmatched) and the walk does not move. An event of
   the next op's name that *contains* the candidate is a wrapper, not the next op: autocast's promoting
   ``aten::cat`` is recorded around the cast of its inputs (``aten::_to_copy``) and the real ``aten::cat``,
   while the counter sees the cast, then the cat;
5. failing that, the in-place twin of the name is tried the same way (``aten::add`` for ``aten::add_`` and
   back): autograd accumulates the gradient of a tensor used twice with ``add`` under the counting mode and
   with ``add_`` without it.

A matched op's time is its event's inclusive time (its children, such as the allocations and the backend
kernel it calls, are its work). What cannot be matched: events the counter never records (views,
``detach``, metadata), the self time of wrappers (the Python and dispatcher overhead around ops),
autograd's bookkeeping, and ops whose shapes differ between the two runs (a data-dependent shape) or that
ran under the counting mode only (or only without it). Their time is the difference between the region's
time and the sum of the op times (``coverage`` < 1).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pytest_roofline.model.op_trace import ProfiledEvent, Shape, TracedOp


def flat_shapes(shapes: Iterable[object]) -> tuple[Shape, ...]:
    """The profiler's per-argument shapes as a sequence of tensor shapes: empty entries (scalars, ``None``,
    int lists, 0-d tensors) and tensor lists (which PyTorch 2.13 records as ``[]``, and other versions may
    record as lists of shapes) left out."""
    return tuple(tuple(entry) for entry in shapes
                 if isinstance(entry, (list, tuple)) and entry and all(isinstance(v, int) for v in entry))


def _counted_shapes(op: TracedOp) -> tuple[Shape, ...]:
    return tuple(s for s in op.shapes if s)


@dataclass(frozen=True)
class _Flat:
    name: str
    shapes: tuple[Shape, ...]
    time_s: float
    end: int  # index just past this event's subtree in the pre-order list


def preorder(roots: Sequence[ProfiledEvent]) -> list[_Flat]:
    """Every event of the trees, a parent before its children, each with the end of its subtree."""
    out: list[_Flat] = []

    def visit(event: ProfiledEvent) -> None:
        index = len(out)
        out.append(_Flat(event.name, flat_shapes(event.shapes), event.time_s, 0))
        for child in event.children:
            visit(child)
        out[index] = _Flat(event.name, out[index].shapes, event.time_s, len(out))

    for root in roots:
        visit(root)
    return out


def _find(events: Sequence[_Flat], op: TracedOp, start: int, stop: int, name: str | None = None) -> int | None:
    shapes = _counted_shapes(op)
    name = name or op.op
    for i in range(start, stop):
        if events[i].name == name and events[i].shapes == shapes:
            return i
    return None


def in_place_twin(name: str) -> str:
    """``aten::add`` <-> ``aten::add_``: autograd accumulates a gradient out of place under the counting mode
    and in place without it (the engine's buffer reuses a tensor only it holds)."""
    return name[:-1] if name.endswith("_") else name + "_"


def join(trace: Sequence[TracedOp], roots: Sequence[ProfiledEvent]) -> list[float | None]:
    """Per counted op (in trace order), the time of the event it matched, or None (see module docs)."""
    events = preorder(roots)
    times: list[float | None] = [None] * len(trace)
    position = 0
    for k, op in enumerate(trace):
        for name in (op.op, in_place_twin(op.op)):
            found = _find(events, op, position, len(events), name)
            if found is None:
                continue
            after = _find(events, trace[k + 1], position, found) if k + 1 < len(trace) else None
            if after is not None and events[after].end <= found:
                continue  # the next op ran before this candidate: this op has no event of its own here
            times[k] = events[found].time_s
            position = events[found].end
            break
    return times


@dataclass(frozen=True)
class KernelTimes:
    """What the join gave one region, over its profiled calls."""

    per_kernel: dict[str, float]  # kernel name -> time per region call (median over the profiled calls)
    matched: int  # counted ops matched to an event (in the worst profiled call)
    total: int  # counted ops
    unmatched: dict[str, int] = field(default_factory=dict)  # op name -> calls without an event
    partial: dict[str, tuple[int, int]] = field(default_factory=dict)  # kernel -> (matched, launches), extrapolated
    other_s: float = 0.0  # matched ops with no kernel sample (no bytes, no FLOPs): e.g. empty factories


def kernel_times(trace: Sequence[TracedOp], calls: Sequence[Sequence[ProfiledEvent]]) -> KernelTimes:
    """Join every profiled call (its root events) to the trace and sum per kernel.

    A kernel whose launches matched only in part is given its matched time scaled by launches / matched
    (recorded in ``partial``); one with no matched launch gets no time.
    """
    per_call: list[dict[str, float]] = []
    others: list[float] = []
    matched_counts: list[int] = []
    unmatched: dict[str, int] = {}
    partial: dict[str, tuple[int, int]] = {}
    for roots in calls:
        times = join(trace, roots)
        sums: dict[str, float] = {}
        hits: dict[str, int] = {}
        launches: dict[str, int] = {}
        other = 0.0
        call_unmatched: dict[str, int] = {}
        for op, seconds in zip(trace, times):
            if op.kernel is not None:
                launches[op.kernel] = launches.get(op.kernel, 0) + 1
            if seconds is None:
                call_unmatched[op.op] = call_unmatched.get(op.op, 0) + 1
                continue
            if op.kernel is None:
                other += seconds
                continue
            sums[op.kernel] = sums.get(op.kernel, 0.0) + seconds
            hits[op.kernel] = hits.get(op.kernel, 0) + 1
        for kernel, hit in hits.items():
            if hit < launches[kernel]:
                sums[kernel] *= launches[kernel] / hit
                partial[kernel] = (hit, launches[kernel])
        per_call.append(sums)
        others.append(other)
        matched_counts.append(sum(t is not None for t in times))
        if sum(call_unmatched.values()) >= sum(unmatched.values()):
            unmatched = call_unmatched
    names = {name for sums in per_call for name in sums}
    per_kernel = {name: statistics.median(sums.get(name, 0.0) for sums in per_call) for name in names}
    return KernelTimes(per_kernel, min(matched_counts, default=0), len(trace), unmatched, partial,
                       statistics.median(others) if others else 0.0)
