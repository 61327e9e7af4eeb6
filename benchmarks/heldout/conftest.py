"""Slowdown injection for benchmarks/gate_sensitivity.py.

With ``ROOFLINE_INJECT_SLOWDOWN=0.1`` every call measured through the ``roofline`` fixture is followed by a
busy wait of 10 % of that call's own time: the work gets slower by a known share without a single extra
FLOP or byte, as a real regression (a worse kernel choice, a lost fusion) would look to the gate.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any

import pytest

SLOWDOWN = float(os.environ.get("ROOFLINE_INJECT_SLOWDOWN", "0") or 0)


def slowed(fn: Callable[..., Any], share: float) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        until = time.perf_counter() + share * (time.perf_counter() - start)
        while time.perf_counter() < until:
            pass
        return result

    return call


@pytest.fixture
def roofline(roofline: Any) -> Any:
    if SLOWDOWN > 0:
        measure = roofline.measure
        roofline.measure = lambda fn, *args, **kwargs: measure(slowed(fn, SLOWDOWN), *args, **kwargs)
    return roofline
