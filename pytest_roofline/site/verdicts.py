"""Is a test's fraction moving? One rule, shared by the site (and meant for the baseline gate).

Rule: compare the ``recent`` values with the ``prior`` ones (on the site: a test's fraction in its last 5
sessions against the 5 before). The change is median(recent) / median(prior) - 1. The verdict is
``regressed`` (or ``improved``) when the change is at least ``min_change`` (5 %) downwards (upwards) *and* a
two-sided Mann-Whitney U test says the two samples differ at ``alpha`` (0.05); otherwise ``steady``. With
fewer than 2 values on either side the verdict is ``new``. The p-value comes from scipy's
``mannwhitneyu`` when scipy is installed; without it, from the exact permutation distribution of U (every
split of the pooled values, while there are at most 20,000) or 20,000 seeded random splits beyond that.
5 against 5 values can reach p = 2/252 = 0.0079 at best, so a real step shows within 5 sessions.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

WINDOW = 5
MIN_CHANGE = 0.05
ALPHA = 0.05
_EXACT_LIMIT = 20_000
_DRAWS = 20_000


@dataclass(frozen=True)
class Comparison:
    verdict: str  # "regressed", "improved", "steady" or "new"
    change: float | None  # median(recent) / median(prior) - 1
    recent_median: float | None
    prior_median: float | None
    p_value: float | None
    method: str  # how the p-value was found

    def describe(self) -> str:
        if self.change is None or self.p_value is None:
            return "too few sessions to compare"
        return (f"median {self.recent_median:.3g} vs {self.prior_median:.3g} ({self.change:+.1%}), "
                f"p = {self.p_value:.3g} ({self.method})")


def _u_statistic(recent: Sequence[float], prior: Sequence[float]) -> float:
    """Mann-Whitney U of ``recent``: pairs where recent is larger, ties counting one half."""
    return sum(1.0 if r > p else 0.5 if r == p else 0.0 for r in recent for p in prior)


def _permutation_p(recent: Sequence[float], prior: Sequence[float]) -> tuple[float, str]:
    pooled = list(recent) + list(prior)
    n = len(recent)
    centre = n * len(prior) / 2
    observed = abs(_u_statistic(recent, prior) - centre)

    def extreme(indices: Sequence[int]) -> bool:
        chosen = set(indices)
        left = [pooled[i] for i in chosen]
        right = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        return abs(_u_statistic(left, right) - centre) >= observed - 1e-12

    if math.comb(len(pooled), n) <= _EXACT_LIMIT:
        splits = list(itertools.combinations(range(len(pooled)), n))
        return sum(map(extreme, splits)) / len(splits), "exact permutation U test"
    rng = random.Random(0)
    hits = sum(extreme(rng.sample(range(len(pooled)), n)) for _ in range(_DRAWS))
    return (hits + 1) / (_DRAWS + 1), f"permutation U test, {_DRAWS} draws"


def p_value(recent: Sequence[float], prior: Sequence[float]) -> tuple[float, str]:
    """Two-sided p-value that ``recent`` and ``prior`` come from one distribution, and the method used."""
    try:
        from scipy.stats import mannwhitneyu
    except ImportError:
        return _permutation_p(recent, prior)
    if len(set(recent) | set(prior)) == 1:
        return 1.0, "Mann-Whitney U"  # all equal: nothing moved (scipy would divide by zero)
    return float(mannwhitneyu(recent, prior, alternative="two-sided").pvalue), "Mann-Whitney U"


def compare(recent: Sequence[float], prior: Sequence[float], *, min_change: float = MIN_CHANGE,
            alpha: float = ALPHA) -> Comparison:
    """The verdict of ``recent`` against ``prior`` (higher is better, as for a fraction)."""
    if len(recent) < 2 or len(prior) < 2:
        return Comparison("new", None, None, None, None, "too few values")
    recent_median, prior_median = statistics.median(recent), statistics.median(prior)
    change = recent_median / prior_median - 1 if prior_median else 0.0
    p, method = p_value(recent, prior)
    verdict = "steady"
    if p < alpha and abs(change) >= min_change:
        verdict = "regressed" if change < 0 else "improved"
    return Comparison(verdict, change, recent_median, prior_median, p, method)


def trend(values: Sequence[float], window: int = WINDOW, **kwargs: float) -> Comparison:
    """The last ``window`` values against the ``window`` before them."""
    return compare(values[-window:], values[-2 * window:-window] if len(values) > window else [], **kwargs)
