"""Change points of a test's fraction over its sessions, found by ruptures (PELT, least-squares cost).

The search runs on log(fraction), so a 10 % step weighs the same at a fraction of 0.05 as at 0.8. The
penalty per change point is ``PENALTY`` x sigma^2 x ln(n) (a BIC-like penalty, made stricter than BIC's 2 so
that noise alone rarely draws a line), where sigma is the noise of one session, estimated robustly from
the median absolute difference of consecutive sessions (a step moves one difference, not the median).
Segments are at least ``MIN_SIZE`` sessions long.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

PENALTY = 4.0
MIN_SIZE = 3


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first value of the new segment
    before: float  # median of the segment before
    after: float  # median of the segment from ``index``

    @property
    def change(self) -> float:
        return self.after / self.before - 1


def noise_sigma(logs: Sequence[float]) -> float:
    """One value's standard deviation from consecutive differences: MAD / 0.6745, over sqrt(2)."""
    diffs = [abs(b - a) for a, b in itertools.pairwise(logs)]
    return statistics.median(diffs) / 0.6745 / math.sqrt(2) if diffs else 0.0


def change_points(values: Sequence[float], penalty: float = PENALTY, min_size: int = MIN_SIZE) -> list[ChangePoint]:
    """Where the level of ``values`` (all > 0) changes; empty for a series too short to split."""
    import numpy as np
    import ruptures

    if len(values) < 2 * min_size:
        return []
    logs = np.log(np.asarray(values, dtype=float))
    sigma = noise_sigma(logs.tolist())
    # A flat series (sigma 0) still gets a tiny penalty, so that only a real jump splits it.
    pen = penalty * max(sigma, 1e-6) ** 2 * math.log(len(values))
    ends = ruptures.KernelCPD(kernel="linear", min_size=min_size).fit(logs.reshape(-1, 1)).predict(pen=pen)
    bounds = [0, *ends]
    segments = [values[a:b] for a, b in itertools.pairwise(bounds)]
    return [ChangePoint(index=int(bounds[i + 1]), before=statistics.median(segments[i]),
                        after=statistics.median(segments[i + 1])) for i in range(len(segments) - 1)]
