"""Which mode object this pytest process registers (``pytest_configure``): the twin, the profiled child, a
plain or an xdist session. Its own module, so that the modes never import one another in a circle."""

from __future__ import annotations

import pytest

from pytest_roofline.plugin.modes import MeasuringSession, Passive, ProfiledChild
from pytest_roofline.session.state import RooflineState


def select_mode(config: pytest.Config, state: RooflineState) -> tuple[str, object]:
    """The mode object this process registers, with its plugin name."""
    from pytest_roofline.host.process_role import is_profiled_child

    if is_profiled_child():
        return "roofline-profiled-child", ProfiledChild()
    from pytest_roofline.plugin.keys import is_twin

    if is_twin():
        from pytest_roofline.ab.plugin.session import TwinSession

        return "roofline-twin", TwinSession(state)
    if not state.settings.enabled:
        return "roofline-passive", Passive(state)
    if hasattr(config, "workerinput"):
        from pytest_roofline.plugin.xdist import XdistWorker

        return "roofline-xdist-worker", XdistWorker(state, config)
    if getattr(config.option, "dist", "no") != "no":
        from pytest_roofline.plugin.xdist import XdistController

        return "roofline-xdist-controller", XdistController(state)
    return "roofline-session", MeasuringSession(state)
