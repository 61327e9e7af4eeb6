"""The ``roofline`` fixture's type, for annotating tests: ``def test_step(roofline: RooflineFixture) -> None``.

Protocols only (no pytest, no torch): the measuring :class:`pytest_roofline.measure.regions.Recorder` and the ncu
child's recorder both satisfy them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

Setup = Callable[[], "tuple[tuple[Any, ...], dict[str, Any]] | None"]


@runtime_checkable
class DeclaredMeasure(Protocol):
    """What ``roofline.declare(...)`` returns: ``.measure(fn, *args)`` times ``fn`` against the declared work."""

    def measure(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any: ...


@runtime_checkable
class RooflineFixture(Protocol):
    """The ``roofline`` fixture.

    ``measure(fn, *args, setup=None, **kwargs)`` counts and times ``fn(*args, **kwargs)`` and returns its
    result (without ``--roofline`` it only calls it once); ``declare(flops=..., bytes=...)`` is for work no
    counter can see; ``regions`` are the call sites measured so far in this test.
    """

    @property
    def regions(self) -> Sequence[Any]: ...  # read-only here, so a recorder's list satisfies it

    def measure(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any: ...

    def declare(
        self,
        flops: float | Mapping[str, float] | None = None,
        bytes: float | Mapping[str, float] | None = None,
        *,
        precision: str = "fp32",
        level: str | None = None,
        name: str | None = None,
        device: str = "cpu",
    ) -> DeclaredMeasure: ...
