"""The paired ratio of two commits' times, from pairs of calls that took turns (docs/ab-compare.md).

Each pair is one call of this commit and one of REF, back to back on the same cores, so whatever the host did in
that moment (a neighbour, a frequency change, the L3's other tenants) hit both. The statistic works on the log
of each pair's ratio: the Hodges-Lehmann estimate (the median of all pairwise means of the log ratios, the
Walsh averages) with the distribution-free interval of the Wilcoxon signed-rank test (normal approximation to
its critical value, fine from about ten pairs on). It assumes the log ratios are symmetric about their centre,
which pairing makes plausible; it does not assume normality. Plain Python and numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
Z = 1.959963984540054  # two-sided 95 % normal quantile
MIN_PAIRS = 10  # below this the interval's normal approximation is poor: no interval, no verdict
MAX_WALSH_PAIRS = 2000  # above this, the Walsh averages of an even subsample (2 million of them at most)


@dataclass(frozen=True)
class PairedRatio:
    ratio: float  # exp(Hodges-Lehmann estimate of the log ratio): time(this) / time(REF)
    ci: tuple[float, float] | None
    pairs: int

    @property
    def half_width(self) -> float:
        """Half the interval's width on the log scale (0.01: about +-1 %); inf without an interval."""
        if self.ci is None:
            return math.inf
        return (math.log(self.ci[1]) - math.log(self.ci[0])) / 2


def walsh_averages(values: np.ndarray) -> np.ndarray:
    """Every (x_i + x_j) / 2 for i <= j, sorted."""
    i, j = np.triu_indices(len(values))
    return np.sort((values[i] + values[j]) / 2)


def paired_ratio(this: Sequence[float], ref: Sequence[float]) -> PairedRatio:
    """Hodges-Lehmann ratio of ``this / ref`` over pairs with its Wilcoxon signed-rank interval."""
    if len(this) != len(ref):
        raise ValueError(f"paired_ratio() needs as many times on each side, got {len(this)} and {len(ref)}")
    a, b = np.asarray(this, dtype=float), np.asarray(ref, dtype=float)
    keep = (a > 0) & (b > 0) & np.isfinite(a) & np.isfinite(b)
    logs = np.log(a[keep] / b[keep])
    n = len(logs)
    if n == 0:
        return PairedRatio(math.nan, None, 0)
    if n > MAX_WALSH_PAIRS:  # an even subsample keeps the interval honest for this many pairs
        logs = logs[np.linspace(0, n - 1, MAX_WALSH_PAIRS).astype(int)]
    walsh = walsh_averages(logs)
    estimate = float(np.median(walsh))
    if n < MIN_PAIRS:
        return PairedRatio(math.exp(estimate), None, n)
    m = len(logs)
    mean = m * (m + 1) / 4
    sd = math.sqrt(m * (m + 1) * (2 * m + 1) / 24)
    k = max(0, math.floor(mean - Z * sd))  # the k-th smallest and largest Walsh averages bound the interval
    lo, hi = float(walsh[k]), float(walsh[len(walsh) - 1 - k])
    return PairedRatio(math.exp(estimate), (math.exp(lo), math.exp(hi)), n)


def verdict(result: PairedRatio, tolerance: float) -> str:
    """``slower``: the ratio is above ``1 + tolerance`` and its interval above 1; ``faster``: the mirror image;
    ``unchanged``: the interval lies inside the tolerance band, or the ratio does with an interval that
    reaches 1; ``inconclusive``: no interval (too few pairs), or a ratio beyond the band whose interval
    still reaches 1 (more pairs would say)."""
    if result.ci is None:
        return "inconclusive"
    lo, hi = result.ci
    if result.ratio > 1 + tolerance:
        return "slower" if lo > 1 else "inconclusive"
    if result.ratio < 1 / (1 + tolerance):
        return "faster" if hi < 1 else "inconclusive"
    return "unchanged"


def settled(result: PairedRatio, tolerance: float, target_half_width: float) -> bool:
    """Enough pairs: the interval is narrow enough, or it already lies wholly beyond the band (clearly slower
    or faster), or wholly inside it (clearly unchanged)."""
    if result.ci is None:
        return False
    if result.half_width <= target_half_width:
        return True
    lo, hi = result.ci
    band_lo, band_hi = 1 / (1 + tolerance), 1 + tolerance
    return lo > band_hi or hi < band_lo or (band_lo < lo and hi < band_hi)
