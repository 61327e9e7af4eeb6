"""``rep.py`` against ``ncu_report`` metric objects of two interface generations.

The current interface has ``has_value()``, ``value()`` and ``unit()``; the 2020-era one (NvRules API 2020.1.2:
``has_value(ValueKind)``, ``kind()``, ``as_double()``/``as_string()``, no ``value()`` or ``unit()``) refuses a
bare ``has_value()``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_roofline.counters.ncu.rep import _metric_value, read_with_module


class CurrentMetric:
    def __init__(self, name: str, value: Any, unit: str) -> None:
        self._name, self._value, self._unit = name, value, unit

    def name(self) -> str:
        return self._name

    def has_value(self) -> bool:
        return self._value is not None

    def value(self) -> Any:
        return self._value

    def unit(self) -> str:
        return self._unit


class OldMetric:
    DOUBLE, STRING = 1, 2

    def __init__(self, name: str, value: Any) -> None:
        self._name, self._value = name, value

    def name(self) -> str:
        return self._name

    def kind(self) -> int:
        return self.STRING if isinstance(self._value, str) else self.DOUBLE

    def has_value(self, value_kind: int) -> bool:  # no default: has_value() raises TypeError
        return self._value is not None and value_kind == self.kind()

    def as_double(self) -> float:
        if isinstance(self._value, str):
            raise TypeError("not a number")
        return float(self._value)

    def as_string(self) -> str:
        return str(self._value)


def test_current_interface() -> None:
    assert _metric_value(CurrentMetric("gpu__time_duration.sum", 2.5, "usecond")) == (pytest.approx(2.5e-6), None)
    assert _metric_value(CurrentMetric("dram__bytes.sum", None, "byte")) == (None, None)
    assert _metric_value(CurrentMetric("device__attribute_display_name", "NVIDIA B300", "")) == (None, "NVIDIA B300")


def test_old_interface_without_argumentless_has_value() -> None:
    # no unit(): ncu's base unit, ns for durations
    assert _metric_value(OldMetric("gpu__time_duration.sum", 2500.0)) == (pytest.approx(2.5e-6), None)
    assert _metric_value(OldMetric("dram__bytes.sum", 1024.0)) == (1024.0, None)
    assert _metric_value(OldMetric("device__attribute_display_name", "Tesla V100")) == (None, "Tesla V100")
    assert _metric_value(OldMetric("lts__t_bytes.sum", None)) == (None, None)


def test_read_a_report_through_the_old_interface() -> None:
    metrics = {m.name(): m for m in (OldMetric("gpu__time_duration.sum", 1000.0),
                                     OldMetric("dram__bytes.sum", 4096.0),
                                     OldMetric("device__attribute_compute_capability_major", 7.0),
                                     OldMetric("device__attribute_compute_capability_minor", 0.0))}
    action = SimpleNamespace(name=lambda *base: "k", metric_names=lambda: list(metrics),
                             metric_by_name=lambda n: metrics[n])
    profile_range = SimpleNamespace(num_actions=lambda: 1, action_by_idx=lambda i: action)
    context = SimpleNamespace(num_ranges=lambda: 1, range_by_idx=lambda i: profile_range)
    module = SimpleNamespace(load_report=lambda path: context)
    (launch,) = read_with_module("old.ncu-rep", module).launches
    assert launch.metrics["gpu__time_duration.sum"] == pytest.approx(1e-6)
    assert launch.metrics["dram__bytes.sum"] == 4096.0
    assert launch.cc == (7, 0)
