"""The ops one counted call ran, in order, and the events a profiler saw: what the per-op join reads.

Plain Python (no torch): the analytic counter writes :class:`TracedOp` s, the profiling pass converts
``torch.profiler`` events into :class:`ProfiledEvent` trees, and :mod:`pytest_roofline.measure.ops.join`
matches one to the other.
"""

from __future__ import annotations

from dataclasses import dataclass

Shape = tuple[int, ...]


@dataclass(frozen=True)
class TracedOp:
    """One aten op call the counter saw.

    ``op`` is spelled as the profiler spells it (``aten::mm``); ``shapes`` are the shapes of its tensor
    arguments in schema order (tensor lists flattened, ``None`` left out); ``kernel`` is the name of the
    :class:`~pytest_roofline.model.KernelSample` its counts went to (``None`` when the op moved no bytes and
    did no FLOPs, so no sample was made for it).
    """

    op: str
    shapes: tuple[Shape, ...]
    kernel: str | None


@dataclass(frozen=True)
class ProfiledEvent:
    """One profiler event: its name, its input shapes as the profiler records them (one entry per argument:
    a list of ints for a tensor, a list of such lists for a tensor list, ``[]`` for anything else), its
    inclusive time (children included) and its children in start order."""

    name: str
    shapes: tuple[object, ...]
    time_s: float
    children: tuple[ProfiledEvent, ...] = ()


def profiler_op_name(overload: str) -> str:
    """``aten.add.Tensor`` (an OpOverload's str) -> ``aten::add`` (the profiler's event name)."""
    namespace, _, rest = overload.partition(".")
    return f"{namespace}::{rest.split('.', 1)[0]}"
