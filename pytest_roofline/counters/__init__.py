"""Counter backends: where a measurement's FLOPs and bytes come from.

Every backend satisfies ``Counter``; ``CounterBase`` gives the optional parts their defaults.
Backends import their heavy dependencies (torch, ncu) only when they are constructed, never at package
import. Backends are made through the ``pytest_roofline_make_counter`` hook
(:mod:`pytest_roofline.plugin.hookspecs`): the built-in ones register through it too, and a plugin or conftest
adds its own (``--roofline-counter NAME``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Protocol, TypeVar, runtime_checkable

from pytest_roofline.model import KernelSample

T = TypeVar("T")


@runtime_checkable
class Counter(Protocol):
    """Counts the work of one call of a callable.

    ``count`` runs ``fn(*args, **kwargs)`` exactly once in a counting pass of its own and returns the
    call's result together with the kernels it launched. Kernel samples carry FLOPs per precision and
    bytes per memory level; ``time_s`` is set only by backends that time kernels one by one.

    After ``count``, the other members describe that call:

    - ``deferred``: the counts come later, from another process (ncu); ``count`` only ran the call;
    - ``footprint_bytes``: the bytes the call touched (its working set), when the backend knows it; then
      the bytes are judged at the cache level that holds them (:mod:`pytest_roofline.model.placement`);
    - ``uncounted_bytes``: ops with FLOPs the backend has no rule for, and the bytes they moved;
    - ``errors``: ops whose counting failed, and why;
    - ``write_allocate_bytes``: per kernel name, the write-allocate reads included in its bytes.

    Optional (read with ``getattr``, so older backends need not have it): ``device``, where the call's work ran,
    ``"cpu"`` or ``"cuda"`` (None: unknown, judged on the session's roofs). In a CUDA session, work that ran
    on the host is judged on the CPU's roofs.
    """

    @property
    def name(self) -> str:
        """Recorded with each measurement: ``analytic``, ``declared``, ``ncu``, or a plugin's name."""
        ...

    @property
    def deferred(self) -> bool: ...

    @property
    def footprint_bytes(self) -> float | None: ...

    @property
    def uncounted_bytes(self) -> Mapping[str, int]: ...

    @property
    def errors(self) -> Mapping[str, str]: ...

    @property
    def write_allocate_bytes(self) -> Mapping[str, float]: ...

    def count(
        self, fn: Callable[..., T], args: tuple[object, ...], kwargs: Mapping[str, object]
    ) -> tuple[T, list[KernelSample]]: ...


class CounterBase:
    """Defaults for ``Counter``'s optional members: not deferred, no working set known, nothing uncounted,
    no errors, no write-allocate reads. A backend sets (as attributes) what it knows."""

    deferred: bool = False
    device: str | None = None
    footprint_bytes: float | None = None
    uncounted_bytes: Mapping[str, int] = MappingProxyType({})  # read-only: one empty map shared by every backend
    errors: Mapping[str, str] = MappingProxyType({})
    write_allocate_bytes: Mapping[str, float] = MappingProxyType({})
