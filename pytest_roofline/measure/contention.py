"""What a gate does with a test whose measurement found no free core (``--roofline-contended``).

``excuse``: a contended test below its threshold or regressed is measured again at the end of the session; if
still contended it is reported, not failed (a shared workstation: a neighbour, not the code, may explain it).
``judge``: the same second measurement, but a test still contended is judged all the same, with its tolerance
widened by the spread its own two contended measurements showed (at most :data:`MAX_SPREAD`): a neighbour that
makes the same code 20 % slower in one measurement than in the other widens a 10 % tolerance to 30 %, and a 2x
slowdown still fails. ``auto`` (the default): ``judge`` when a CI service is detected (the ``CI`` environment
variable) or a baseline / A/B gate is on, else ``excuse``. ``--roofline-strict`` gates the first measurement
as is, without a second.

Plain Python: no pytest.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_roofline.measure.regions import Region

CONTENDED_MODES = ("auto", "judge", "excuse")
# The most a contended test's tolerance is widened: a 2x slowdown (+100 %) must fail on any runner.
MAX_SPREAD = 0.5


def in_ci(environ: Mapping[str, str] = os.environ) -> bool:
    """``CI`` set to anything but empty, 0 or false: GitHub Actions, GitLab, CircleCI, Travis, Buildkite set it."""
    return environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def resolve(mode: str, *, baseline: bool, compare: bool, environ: Mapping[str, str] = os.environ) -> str:
    """``judge`` or ``excuse`` for the session: ``auto`` judges in CI and under a baseline or A/B gate."""
    if mode != "auto":
        return mode
    return "judge" if baseline or compare or in_ci(environ) else "excuse"


def spread(first_times: Sequence[float], second_times: Sequence[float], iqr_rel: Sequence[float] = ()) -> float:
    """The spread of a test's contended measurements: how far apart its two measurements' total times per call
    are, relative to the faster, or the widest interquartile range of a region's calls, whichever is larger;
    capped at :data:`MAX_SPREAD`."""
    first, second = sum(first_times), sum(second_times)
    between = abs(first - second) / min(first, second) if min(first, second) > 0 else 0.0
    within = max((float(x) for x in iqr_rel), default=0.0)
    return min(MAX_SPREAD, max(between, within, 0.0))


def widened_min_fraction(min_fraction: float, spread_: float) -> float:
    """The threshold a contended fraction is held to: the fraction may be ``1 + spread`` times too low."""
    return min_fraction / (1.0 + spread_)


def widened_tolerances(max_drop: float, max_slowdown: float, spread_: float) -> tuple[float, float]:
    """(max_drop, max_slowdown) widened by ``spread_``: the time may rise by ``spread_`` more, and the fraction
    fall as far as that rise makes it fall."""
    slowdown = max_slowdown + spread_
    drop = 1.0 - (1.0 - max_drop) / (1.0 + spread_)
    return drop, slowdown


def describe(spread_: float) -> str:
    return (f"judged while still contended (--roofline-contended judge): tolerance widened by the spread of its "
            f"two contended measurements, {spread_:.0%} (at most {MAX_SPREAD:.0%})")


def region_times(regions: Sequence[Region]) -> list[float]:
    """Each region's time per call (its verdict's), for :func:`spread`."""
    return [float(r.verdict.time_s) for r in regions if getattr(r, "verdict", None) is not None]


def region_iqr(regions: Sequence[Region]) -> list[float]:
    """Each contended region's relative interquartile range of its calls."""
    out = []
    for r in regions:
        placed, timing = getattr(r, "placement", None), getattr(r, "timing", None)
        if placed is not None and placed.contended and timing is not None:
            out.append(float(getattr(timing, "iqr_rel", 0.0)))
    return out
