"""Hooks that pytest-roofline calls, for plugins and conftest files to implement.

Registered by the plugin's ``pytest_addhooks``. Write an implementation as any pytest hook::

    # conftest.py
    from pytest_roofline.counters import CounterBase

    class RocprofCounter(CounterBase):
        name = "rocprof"

        def count(self, fn, args, kwargs):
            result = fn(*args, **kwargs)
            return result, [KernelSample("kernel", {"fp32": 2e9}, {"HBM": 1e8})]

    def pytest_roofline_make_counter(name, config):
        if name == "rocprof":
            return RocprofCounter()

and select it with ``--roofline-counter rocprof``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_roofline.counters import Counter


@pytest.hookspec(firstresult=True)
def pytest_roofline_make_counter(name: str, config: pytest.Config) -> Counter | None:
    """Make the counter called ``name`` (``--roofline-counter``; ``auto`` is resolved before this is called),
    or return None to leave it to another plugin; the first counter returned is used. Called once per
    measured test, when its first call site is measured, so heavy imports belong here, not at import time.
    The built-in ``analytic``, ``declared`` and ``ncu`` are made by the plugin's own implementation, which
    runs last: a plugin may replace them by answering their names."""
