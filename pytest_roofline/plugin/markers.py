"""The ``roofline`` marker: its help text and its arguments, validated while collecting."""

from __future__ import annotations

import pytest

from pytest_roofline.session.settings import MarkerOptions, SettingError

MARKER_HELP = (
    "roofline(min_fraction=None, uncounted=None, max_drop=None, max_slowdown=None, fail_on=None): measure the "
    "test's roofline.measure() calls under --roofline and fail it when the attained fraction of the roofline is "
    "below min_fraction (a number in (0, 1], or one per device where its work ran: {'cpu': 0.2, 'cuda': 0.5}); "
    "uncounted='warn'|'fail' overrides --roofline-uncounted; with "
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


def gating(config: pytest.Config) -> bool:
    """Whether this session fails tests on their roofline gates: ``--roofline`` without ``--roofline-warn-only``,
    and not in a process that only runs tests for another (the ncu-profiled child, the A/B twin). For a test
    that must fail its gate, as a string condition of ``xfail``:
    ``@pytest.mark.xfail("gating(config)", strict=True)`` with ``from pytest_roofline.plugin.markers import
    gating`` in the test module (pytest evaluates the string with the module's names and ``config``)."""
    from pytest_roofline.host.process_role import is_profiled_child
    from pytest_roofline.plugin.keys import STATE, is_twin

    state = config.stash.get(STATE, None)
    if state is None or is_profiled_child() or is_twin():
        return False
    return bool(state.settings.enabled and not state.settings.warn_only)
