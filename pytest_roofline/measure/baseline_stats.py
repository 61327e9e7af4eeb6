"""Is a test's fraction lower than its baseline's, beyond noise? A hierarchical bootstrap of the ratio
now / baseline (README, "Baseline gate"). Plain Python and numpy; deterministic for a given seed.

One session's rounds are correlated (same process, same heap, same neighbours on the host), so their spread
understates how much a test moves from one session to the next. The baseline side is resampled in two levels
(sessions, then rounds within each) and the spread between sessions is added to the current session as well: it
is one more draw from the same distribution of sessions, not a session whose own luck is known.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

REPLICATES = 1000
CONFIDENCE = 0.95
# With a single baseline session the session-to-session spread cannot be measured; it is assumed to be this
# (sd of the log fraction), the order of what sessions on a shared host move (README, "Baseline gate").
SINGLE_SESSION_SIGMA = 0.05
VERDICTS = ("regressed", "improved", "steady", "new", "noisy")


@dataclass(frozen=True)
class Measurement:
    """One test in one session: its fraction and, per region, its lower-bound time and the per-round times of
    each part (a region timed as several call sites has several), so rounds can be resampled."""

    fraction: float
    regions: tuple[tuple[float, tuple[np.ndarray, ...]], ...]

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Measurement | None:
        """From a ``results.json`` / history test record; None when it has no fraction."""
        fraction = record.get("fraction")
        if not isinstance(fraction, (int, float)) or not math.isfinite(fraction) or fraction <= 0:
            return None
        regions = [_region(r) for r in record.get("regions") or []]
        return cls(float(fraction), tuple(r for r in regions if r is not None))

    def medians_fraction(self) -> float:
        """sum(t_min) / sum(median time) of the recorded rounds (``model.combine`` on medians)."""
        times = sum(sum(float(np.median(p)) for p in parts) for _, parts in self.regions)
        return sum(t for t, _ in self.regions) / times if times > 0 else self.fraction

    def resample(self, rng: np.random.Generator, replicates: int) -> np.ndarray:
        """``replicates`` fractions, each from rounds drawn with replacement within every part. They are scaled
        so that the recorded rounds give the recorded fraction (a live-probe roof or a confirmation can make
        it differ slightly from sum(t_min) / sum(median))."""
        if not self.regions:
            return np.full(replicates, self.fraction)
        times = np.zeros(replicates)
        for _, parts in self.regions:
            for samples in parts:
                picks = rng.integers(0, len(samples), size=(replicates, len(samples)))
                times += np.median(samples[picks], axis=1)
        t_min = sum(t for t, _ in self.regions)
        return self.fraction * (t_min / times) / self.medians_fraction()


def _region(record: Mapping[str, Any]) -> tuple[float, tuple[np.ndarray, ...]] | None:
    t_min = record.get("t_min_s")
    if not isinstance(t_min, (int, float)) or t_min <= 0:
        return None
    timing = record.get("timing") or {}
    parts = [timing.get("samples_s") or []]
    if not parts[0]:  # timed as several call sites: each part keeps its own rounds
        parts = [(p.get("timing") or {}).get("samples_s") or [] for p in record.get("parts") or []]
    arrays = tuple(np.asarray(p, dtype=float) for p in parts if p)
    if not arrays or any(not np.all(a > 0) for a in arrays):
        time_s = record.get("time_s") or timing.get("median_s")
        if not isinstance(time_s, (int, float)) or time_s <= 0:
            return None
        arrays = (np.asarray([float(time_s)]),)  # no rounds kept: a fixed time
    return float(t_min), arrays


@dataclass(frozen=True)
class Comparison:
    baseline_fraction: float  # median of the baseline sessions' fractions
    fraction: float
    ratio: float  # fraction / baseline_fraction
    ci: tuple[float, float]
    session_sigma: float  # spread of log fraction between baseline sessions (or the assumed one)
    verdict: str
    statistic: str

    @property
    def drop(self) -> float:
        return 1.0 - self.ratio


def seed_for(nodeid: str) -> int:
    """The same test draws the same replicates in every run: a gate's decision is reproducible."""
    return zlib.crc32(nodeid.encode("utf-8", "surrogatepass"))


def compare(current: Measurement, baseline: Sequence[Measurement], max_drop: float, *, seed: int = 0,
            replicates: int = REPLICATES) -> Comparison:
    """Ratio now / baseline with its bootstrap confidence interval, and the verdict:

    - ``regressed``: the ratio is below ``1 - max_drop`` and the interval's upper end below 1;
    - ``noisy``: the ratio is below ``1 - max_drop`` but the interval reaches 1 (not significant);
    - ``improved``: the ratio is above ``1 + max_drop`` and the interval's lower end above 1;
    - ``steady``: anything else.

    Each replicate: draw K baseline sessions with replacement, resample the rounds of each, take the median of
    their fractions; resample the current rounds; multiply by a session effect exp(s * t) with s the sd of the
    baseline sessions' log fractions and t Student's with K - 1 degrees of freedom (the predictive spread of
    a new session; few sessions, wide tails), or s = SINGLE_SESSION_SIGMA and a normal t when K = 1.
    """
    if not baseline:
        raise ValueError("compare() needs at least one baseline measurement")
    rng = np.random.default_rng(seed)
    k = len(baseline)
    fractions = np.array([m.fraction for m in baseline])
    center = float(np.median(fractions))
    ratio = current.fraction / center
    per_session = np.stack([m.resample(rng, replicates) for m in baseline])  # (K, replicates)
    drawn = rng.integers(0, k, size=(replicates, k))
    base = np.median(per_session[drawn, np.arange(replicates)[:, None]], axis=1)
    now = current.resample(rng, replicates)
    if k >= 2:
        sigma = float(np.std(np.log(fractions), ddof=1))
        effect = sigma * rng.standard_t(k - 1, size=replicates)
    else:
        sigma = SINGLE_SESSION_SIGMA
        effect = sigma * rng.standard_normal(replicates)
    ratios = now / base * np.exp(effect)
    tail = (1 - CONFIDENCE) / 2 * 100
    lo, hi = (float(v) for v in np.percentile(ratios, [tail, 100 - tail]))
    if ratio < 1 - max_drop:
        verdict = "regressed" if hi < 1 else "noisy"
    elif ratio > 1 + max_drop and lo > 1:
        verdict = "improved"
    else:
        verdict = "steady"
    spread = (f"session-to-session sd {sigma:.1%} from {k} sessions, Student t with {k - 1} df" if k >= 2 else
              f"one baseline session: session-to-session sd assumed {sigma:.0%}")
    statistic = (f"ratio now/baseline {ratio:.3f}, {CONFIDENCE:.0%} CI [{lo:.3f}, {hi:.3f}] (hierarchical bootstrap, "
                 f"{replicates} replicates: baseline sessions then their rounds, current rounds; {spread})")
    return Comparison(center, current.fraction, ratio, (lo, hi), sigma, verdict, statistic)
