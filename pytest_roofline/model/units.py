"""SI and time formatting shared by every layer that prints a number."""

from __future__ import annotations


def si(value: float, unit: str, sep: str = " ") -> str:
    """Format a value with an SI prefix: 1.5e9, "FLOP/s" -> "1.5 GFLOP/s" (``sep=""``: "1.5GFLOP/s")."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{sep}{prefix}{unit}"
    return f"{value:.3g}{sep}{unit}"


def time_text(seconds: float | None, digits: int = 3) -> str:
    """``2.1 ms``, ``850 us``, ``1.23 s`` (``digits`` significant digits); ``-`` for none."""
    if seconds is None or seconds <= 0:
        return "-"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if seconds >= scale:
            return f"{seconds / scale:.{digits}g} {unit}"
    return f"{seconds * 1e9:.{digits}g} ns"
