"""Thresholds from history: the ``min_fraction`` a machine's clean sessions support, per test, and the smallest
slowdown that threshold then catches.

A threshold has to sit below every clean session the runner will ever produce, and a slowdown ``d`` (time ×
(1 + d)) lowers a fraction to 1 / (1 + d) of it. From K clean sessions of one machine, with median fraction
``m`` and standard deviation ``s`` of their log fractions (the spread between sessions, which is what a
threshold meets; the rounds inside one session are far steadier):

    suggested = min(m · exp(−t · s · √(1 + 1/K)),  0.99 × the worst session)

with ``t`` Student's one-sided 99.9 % quantile at K − 1 degrees of freedom: the lower end of a prediction
interval for the next clean session, so a clean run fails about once in a thousand per test (few sessions
make ``t`` large and the threshold low, honestly). A slowed session reads ``m / (1 + d)`` with the same
spread, so it is flagged in at least 95 % of sessions once

    d ≥ m / suggested · exp(1.645 · s) − 1       (the smallest slowdown the threshold catches).

Plain Python over ``history.reader`` sessions; no pytest, no numpy.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_roofline.record.sessions import Session
from pytest_roofline.record.tests import TestRecord

MIN_SESSIONS = 3  # two degrees of freedom: below that no spread can be told
WORST_MARGIN = 0.99  # never above 99 % of the worst clean session seen
Z_95 = 1.645  # one-sided 95 %: a slowdown counts as caught when this share of its sessions is flagged
# Student's t, one-sided 99.9 % quantile, by degrees of freedom (standard tables); beyond 30, interpolated
# in 1/df towards the normal quantile 3.090.
_T_999 = {1: 318.31, 2: 22.327, 3: 10.215, 4: 7.173, 5: 5.893, 6: 5.208, 7: 4.785, 8: 4.501, 9: 4.297,
          10: 4.144, 11: 4.025, 12: 3.930, 13: 3.852, 14: 3.787, 15: 3.733, 16: 3.686, 17: 3.646, 18: 3.610,
          19: 3.579, 20: 3.552, 21: 3.527, 22: 3.505, 23: 3.485, 24: 3.467, 25: 3.450, 26: 3.435, 27: 3.421,
          28: 3.408, 29: 3.396, 30: 3.385}
_Z_999 = 3.090


def t_999(df: int) -> float:
    """Student's t one-sided 99.9 % quantile at ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df in _T_999:
        return _T_999[df]
    return _Z_999 + (_T_999[30] - _Z_999) * 30 / df  # the tail shrinks about like 1/df


def caught_from(median: float, threshold: float, log_sd: float) -> float:
    """The smallest slowdown (share of time) a ``threshold`` flags in >= 95 % of sessions of a test whose
    sessions read ``median`` with spread ``log_sd``."""
    return median / threshold * math.exp(Z_95 * log_sd) - 1


@dataclass(frozen=True)
class Advice:
    """What a test's history says about its threshold on one machine."""

    nodeid: str
    machine_key: str
    sessions: int
    median: float
    worst: float
    log_sd: float  # standard deviation of the sessions' log fractions (0 with one session)
    current: float | None  # the min_fraction of its latest session (None: not gated by a threshold)
    suggested: float | None  # None: fewer than MIN_SESSIONS sessions
    catches: float | None  # smallest slowdown (share of time) flagged in >= 95 % of sessions at ``suggested``
    expected_failure: bool = False  # its latest session xfailed: a threshold above it is the point

    @property
    def warning(self) -> str:
        """Why the current threshold needs a look, or ''."""
        if self.current is None or self.suggested is None or self.expected_failure:
            return ""
        if self.current > self.suggested:
            return "above the suggestion: clean sessions may fail it"
        if self.current < self.suggested * 0.8:
            slowdown = caught_from(self.median, self.current, self.log_sd)
            return f"far below the suggestion: catches only slowdowns over {slowdown:.0%}"
        return ""


def advise_test(nodeid: str, machine_key: str, fractions: Sequence[float], current: float | None,
                expected_failure: bool = False) -> Advice:
    """The advice for one test from its sessions' fractions (oldest first)."""
    if not fractions or any(not (f > 0 and math.isfinite(f)) for f in fractions):
        raise ValueError(f"{nodeid}: fractions must be positive numbers, got {list(fractions)!r}")
    median, worst = statistics.median(fractions), min(fractions)
    k = len(fractions)
    logs = [math.log(f) for f in fractions]
    log_sd = statistics.stdev(logs) if k > 1 else 0.0
    suggested = catches = None
    if k >= MIN_SESSIONS:
        bound = median * math.exp(-t_999(k - 1) * log_sd * math.sqrt(1 + 1 / k))
        suggested = math.floor(min(bound, WORST_MARGIN * worst) * 1000) / 1000  # rounded down: never above
        catches = caught_from(median, suggested, log_sd) if suggested > 0 else None
    return Advice(nodeid, machine_key, k, median, worst, log_sd, current, suggested, catches, expected_failure)


def advise(sessions: Sequence[Session], *, last: int = 10) -> list[Advice]:
    """Per machine and test, the advice from that machine's ``last`` sessions that measured the test."""
    by_test: dict[tuple[str, str], list[float]] = {}
    latest: dict[tuple[str, str], TestRecord] = {}
    for session in sessions:  # oldest first (reader.load orders them)
        for nodeid, record in session.tests.items():
            if record.fraction is not None and record.fraction > 0:
                by_test.setdefault((session.machine_key, nodeid), []).append(record.fraction)
                latest[session.machine_key, nodeid] = record
    advice = []
    for (key, nodeid), fractions in sorted(by_test.items()):
        last_record = latest[key, nodeid]
        advice.append(advise_test(nodeid, key, fractions[-last:], last_record.min_fraction,
                                  last_record.outcome == "xfailed"))
    return advice
