"""Declared counts: the test states the work, the plugin times it.

For code PyTorch's dispatcher cannot see (numpy, CuPy kernels, Triton, C extensions). Declared work runs on
the host (``device="cpu"``, judged on the CPU's roofs even in a CUDA session) unless declared with
``device="cuda"`` (bytes then at ``HBM`` by default).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from pytest_roofline.counters import CounterBase
from pytest_roofline.model import DEVICES, MAIN_MEMORY, KernelSample  # MAIN_MEMORY: bytes' default level

T = TypeVar("T")


def _as_map(value: float | Mapping[str, float] | None, default_key: str, what: str) -> dict[str, float]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        items = dict(value)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        items = {default_key: value}
    else:
        raise TypeError(f"{what} must be a number or a mapping of names to numbers, got {type(value).__name__}")
    out: dict[str, float] = {}
    for key, number in items.items():
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise TypeError(f"{what}[{key!r}] must be a number, got {number!r}")
        if not math.isfinite(number) or number < 0:
            raise ValueError(f"{what}[{key!r}] must be a finite number >= 0, got {number!r}")
        out[str(key)] = float(number)
    return out


@dataclass(frozen=True)
class DeclaredCounter(CounterBase):
    """A :class:`~pytest_roofline.counters.Counter` that reports what the test declared.

    ``flops`` is a number (of ``precision``) or ``{precision: FLOPs}``; ``bytes`` a number (at ``level``) or
    ``{level: bytes}``; both per call of the measured callable.
    """

    flops: Mapping[str, float] = field(default_factory=dict)
    bytes: Mapping[str, float] = field(default_factory=dict)
    kernel_name: str = "declared"
    name: str = "declared"
    device: str | None = "cpu"

    @classmethod
    def from_user(
        cls,
        flops: float | Mapping[str, float] | None = None,
        bytes: float | Mapping[str, float] | None = None,
        *,
        precision: str = "fp32",
        level: str | None = None,
        name: str = "declared",
        device: str = "cpu",
    ) -> DeclaredCounter:
        if device not in DEVICES:
            raise ValueError(f"declare(device=...) must be one of {', '.join(DEVICES)}, got {device!r}")
        flop_map = _as_map(flops, precision, "flops")
        byte_map = _as_map(bytes, level or MAIN_MEMORY[device], "bytes")
        if not flop_map and not byte_map:
            raise ValueError("declare at least one of flops= or bytes= (per call of the measured callable)")
        return cls(flop_map, byte_map, name, device=device)

    def count(
        self, fn: Callable[..., T], args: tuple[object, ...], kwargs: Mapping[str, object]
    ) -> tuple[T, list[KernelSample]]:
        result = fn(*args, **kwargs)
        return result, [KernelSample(self.kernel_name, dict(self.flops), dict(self.bytes))]
