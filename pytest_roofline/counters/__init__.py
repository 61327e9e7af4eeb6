"""Counter backends: where a measurement's FLOPs and bytes come from.

Every backend satisfies :class:`Counter`. Backends import their heavy dependencies (torch, ncu) only
when they are constructed, never at package import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from pytest_roofline.model import KernelSample


@runtime_checkable
class Counter(Protocol):
    """Counts the work of one call of a callable.

    ``count`` runs ``fn(*args, **kwargs)`` exactly once in a counting pass of its own and returns the
    call's result together with the kernels it launched. Kernel samples carry FLOPs per precision and
    bytes per memory level; ``time_s`` is set only by backends that time kernels one by one.
    """

    @property
    def name(self) -> str:
        """Recorded with each measurement: ``analytic``, ``declared``, ``ncu``."""
        ...

    def count(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> tuple[Any, list[KernelSample]]: ...
