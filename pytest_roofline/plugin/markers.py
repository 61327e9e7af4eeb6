"""The ``roofline`` marker: its help text and its arguments, validated while collecting."""

from __future__ import annotations

import pytest

from pytest_roofline.measure.settings import MarkerOptions, SettingError

MARKER_HELP = (
    "roofline(min_fraction=None, uncounted=None, max_drop=None, max_slowdown=None, fail_on=None): measure the "
    "test's roofline.measure() calls under --roofline and fail it when the attained fraction of the roofline is "
    "below min_fraction (a number in (0, 1]); uncounted='warn'|'fail' overrides --roofline-uncounted; with "
    "--roofline-baseline or --roofline-compare, fail it when it got significantly slower or less efficient: "
    "max_drop (fraction), max_slowdown (time per call) and fail_on ('time', 'fraction', 'work' or 'none', or a "
    "list) override --roofline-max-drop, --roofline-max-slowdown (or --roofline-compare-max-slowdown) and "
    "--roofline-fail-on. Without a threshold or a baseline the test is reported, not gated."
)


def marker_options(item: pytest.Item) -> MarkerOptions | None:
    marker = item.get_closest_marker("roofline")
    if marker is None:
        return None
    try:
        return MarkerOptions.from_marker(marker.args, marker.kwargs)
    except SettingError as exc:
        raise pytest.Collector.CollectError(f"{item.nodeid}: {exc}") from None


def wants_roofline(item: pytest.Item) -> bool:
    return item.get_closest_marker("roofline") is not None or "roofline" in getattr(item, "fixturenames", ())
