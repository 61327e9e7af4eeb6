"""Slowdown injection and thresholds for benchmarks/gate_sensitivity.py.

With ``ROOFLINE_MIN_FRACTIONS='{"test_conv2d": 0.8}'`` a test gets that ``min_fraction`` (a roofline marker
put before its own), so the plugin's gate itself decides, --roofline-confirm included.

With ``ROOFLINE_INJECT_SLOWDOWN=0.1`` every call measured through the ``roofline`` fixture is followed by a
busy wait of 10 % of that call's own time: the work gets slower by a known share without a single extra
FLOP or byte, as a real regression (a worse kernel choice, a lost fusion) would look to the gate.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable
from typing import Any

import pytest

SLOWDOWN = float(os.environ.get("ROOFLINE_INJECT_SLOWDOWN", "0") or 0)
THRESHOLDS: dict[str, float] = json.loads(os.environ.get("ROOFLINE_MIN_FRACTIONS", "{}") or "{}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = item.name.split("[")[0]
        if name in THRESHOLDS:
            item.add_marker(pytest.mark.roofline(min_fraction=THRESHOLDS[name]), append=False)


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
