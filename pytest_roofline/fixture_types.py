"""The ``roofline`` fixture's type, for annotating tests: ``def test_step(roofline: RooflineFixture) -> None``.

Protocols only (no pytest, no torch): the measuring :class:`pytest_roofline.measure.regions.Recorder` and the ncu
child's recorder both satisfy them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

# A setup step returns None (it reset state in place) or fresh ``(args, kwargs)``: any values, passed on to the
# measured function as they are. The one definition: the recorders and the timing loop use it too.
Setup = Callable[[], "tuple[tuple[object, ...], Mapping[str, object]] | None"]
Result = TypeVar("Result")  # what the measured function returns, and so what ``measure`` returns
# ``measure``'s keywords stay untyped: they include ``setup`` beside the function's own keywords, and ``object``
# here would reject the recorders' signatures.


@runtime_checkable
class DeclaredMeasure(Protocol):
    """What ``roofline.declare(...)`` returns: ``.measure(fn, *args)`` times ``fn`` against the declared work."""

    def measure(self, fn: Callable[..., Result], /, *args: object, **kwargs: Any) -> Result: ...


@runtime_checkable
class RooflineFixture(Protocol):
    """The ``roofline`` fixture.

    ``measure(fn, *args, setup=None, **kwargs)`` counts and times ``fn(*args, **kwargs)`` and returns its
    result (without ``--roofline`` it only calls it once); ``declare(flops=..., bytes=...)`` is for work no
    counter can see; ``regions`` are the call sites measured so far in this test.
    """

    # read-only here, so a recorder's list satisfies it; untyped items: they are measure.regions.Region (a higher
    # layer), whose attributes a test reads
    @property
    def regions(self) -> Sequence[Any]: ...

    def measure(self, fn: Callable[..., Result], /, *args: object, **kwargs: Any) -> Result:
        """Count and time one call site; return ``fn(*args, **kwargs)``.

        Args:
            fn: The function measured. Under ``--roofline`` it is called many times (a counted call, warm-up,
                timed calls); without it, once.
            *args: Its positional arguments.
            **kwargs: Its keyword arguments, except ``setup``: a callable returning fresh ``(args, kwargs)``
                before each call, for a function that changes its inputs (not timed).

        Returns:
            The result of one call of ``fn``.
        """
        ...

    def declare(
        self,
        flops: float | Mapping[str, float] | None = None,
        bytes: float | Mapping[str, float] | None = None,
        *,
        precision: str = "fp32",
        level: str | None = None,
        name: str | None = None,
        device: str = "cpu",
    ) -> DeclaredMeasure:
        """Declare the work of code no counter can see (numpy, CuPy, C extensions); ``.measure(fn, *args)``
        on the result times ``fn`` against it.

        Args:
            flops: FLOPs per call: a number (of ``precision``) or ``{precision: FLOPs}``.
            bytes: Bytes moved per call: a number (at ``level``) or ``{level: bytes}``.
            precision: The precision of a plain ``flops`` number (``fp64``, ``fp32``, ``bf16``, ``fp16`` ...).
            level: The memory level of a plain ``bytes`` number (``DRAM``, ``L3``, ``L2``, ``L1``, ``HBM``).
            name: The kernel's name in the kernel table (default ``declared``).
            device: Where the work runs, ``"cpu"`` (default) or ``"cuda"``: it is judged on that device's roofs.

        Returns:
            A ``DeclaredMeasure`` whose ``measure(fn, *args, **kwargs)`` returns ``fn``'s result.
        """
        ...
