"""Slowdown injection and thresholds for benchmarks/gate_sensitivity.py.

With ``ROOFLINE_MIN_FRACTIONS='{"test_conv2d": 0.8}'`` a test gets that ``min_fraction`` (a roofline marker
put before its own), so the plugin's gate itself decides, --roofline-confirm included.

With ``ROOFLINE_INJECT_SLOWDOWN=0.1`` every call measured through the ``roofline`` fixture is followed by a
busy wait of 10 % of that call's own time: the work gets slower by a known share without a single extra
FLOP or byte, as a real regression (a worse kernel choice, a lost fusion) would look to the gate. The wrapper
is there whenever the variable is set, ``0`` included (gate_sensitivity.py always sets it), and its wait counts
its own cost: that is 11 % of the 2.8 us cache-resident add (Zen 4 VM), and without both a nominal 10 %
slowdown of that test read 18.6 % (no wrapper in clean sessions) or 6.1 % (the wait a share of the call alone).
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable
from typing import Any

import pytest

INJECT = os.environ.get("ROOFLINE_INJECT_SLOWDOWN")  # unset: no wrapper at all
SLOWDOWN = float(INJECT or 0)
THRESHOLDS: dict[str, float] = json.loads(os.environ.get("ROOFLINE_MIN_FRACTIONS", "{}") or "{}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = item.name.split("[")[0]
        if name in THRESHOLDS:
            item.add_marker(pytest.mark.roofline(min_fraction=THRESHOLDS[name]), append=False)


def slowed(fn: Callable[..., Any], share: float, costs: tuple[float, float] | None = None) -> Callable[..., Any]:
    """``fn`` followed by a busy wait that makes the whole wrapped call ``1 + share`` times as long as the
    wrapped call at share 0: ``share`` x (the call + the wrapper's cost), plus the lag of the wait loop's first
    check, which a share-0 call spends too (``costs``: (wrapper cost, lag) in seconds, measured when None)."""
    cost, lag = wrapper_costs() if costs is None else costs

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        now = time.perf_counter()
        until = now + share * (now - start + cost) + (lag if share > 0 else 0.0)
        while time.perf_counter() < until:
            pass
        return result

    return call


@functools.cache
def wrapper_costs() -> tuple[float, float]:
    """(what the wrapper adds to a call at share 0, the lag of its wait loop's first check), medians of many."""
    def nothing() -> None:
        return None

    def median_call(fn: Callable[[], None]) -> float:
        times = []
        for _ in range(2001):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return sorted(times)[1000]

    lags = []
    for _ in range(2001):
        now = time.perf_counter()
        until = now + 0.0
        while time.perf_counter() < until:
            pass
        lags.append(time.perf_counter() - now)
    cost = max(0.0, median_call(slowed(nothing, 0.0, (0.0, 0.0))) - median_call(nothing))
    return cost, sorted(lags)[1000]


@pytest.fixture
def roofline(roofline: Any) -> Any:
    if INJECT is not None:
        measure = roofline.measure
        roofline.measure = lambda fn, *args, **kwargs: measure(slowed(fn, SLOWDOWN), *args, **kwargs)
    return roofline
