"""Did a test get slower, or less efficient, than in its baseline sessions, beyond noise? A hierarchical
bootstrap of the ratios now / baseline of its time per call and of its fraction (docs/history.md).
Plain Python and numpy; deterministic for a given seed.

One session's rounds are correlated (same process, same heap, same neighbours on the host), so their spread
understates how much a test moves from one session to the next. The baseline side is resampled in two levels
(sessions, then rounds within each) and the spread between sessions is added to the current session as well: it
is one more draw from the same distribution of sessions, not a session whose own luck is known. With fewer
than :data:`MIN_OWN_SESSIONS` baseline sessions the test's own spread is not measured well enough; the spread
pooled over the machine's other tests is used instead, and without that the verdict is ``inconclusive``:
never a failure from an assumed spread.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, TypeGuard

import numpy as np

from pytest_roofline.measure.work import Work
from pytest_roofline.record.tests import TestRecord

REPLICATES = 1000
CONFIDENCE = 0.95
MIN_OWN_SESSIONS = 3  # below this a test's own session-to-session spread is not trusted (1 or 2 df)
MIN_POOLED_DF = 4  # the pooled spread needs at least this many degrees of freedom to stand in for it


@dataclass(frozen=True)
class Measurement:
    """One test in one session: its fraction, time per call and counted work and, per region, its lower-bound
    time and the per-round times of each part (a region timed as several call sites has several), so rounds
    can be resampled."""

    fraction: float
    regions: tuple[tuple[float, tuple[np.ndarray, ...]], ...]
    time_s: float = 0.0  # the test's time per call: the sum of its regions' median times
    work: Work | None = None

    @classmethod
    def from_record(cls, record: TestRecord) -> Measurement | None:
        """From a ``results.json`` / history test record; None when it has no fraction."""
        return cls.of(record.fraction, record.time_s, record.regions, Work.from_record(record))

    @classmethod
    def of(cls, fraction: float | None, time_s: float | None, regions: Sequence[Mapping[str, Any]],
           work: Work | None) -> Measurement | None:
        """From a fraction, a time per call, the regions as their records write them and the work; None
        without a positive fraction. The test being judged and its baseline's records both come through here."""
        if not _positive(fraction):
            return None
        parts = tuple(r for r in map(_region, regions) if r is not None)
        if not _positive(time_s):
            time_s = sum(sum(float(np.median(p)) for p in times) for _, times in parts)
        return cls(fraction, parts, time_s, work)

    def _median_time(self) -> float:
        return sum(sum(float(np.median(p)) for p in parts) for _, parts in self.regions)

    def resampled_time_factor(self, rng: np.random.Generator, replicates: int) -> np.ndarray:
        """``replicates`` factors (time of resampled rounds / time of the recorded rounds), each from rounds
        drawn with replacement within every part; 1 where no rounds were kept."""
        if not self.regions:
            return np.ones(replicates)
        times = np.zeros(replicates)
        for _, parts in self.regions:
            for samples in parts:
                picks = rng.integers(0, len(samples), size=(replicates, len(samples)))
                times += np.median(samples[picks], axis=1)
        median = self._median_time()
        return times / median if median > 0 else np.ones(replicates)

    def value(self, quantity: str) -> float:
        return self.time_s if quantity == "time" else self.fraction

    def resample(self, rng: np.random.Generator, replicates: int, quantity: str = "fraction") -> np.ndarray:
        """``replicates`` resampled values of ``quantity`` (``time`` or ``fraction``). They are scaled so that
        the recorded rounds give the recorded value (a live-probe roof or a confirmation can make the recorded
        fraction differ slightly from sum(t_min) / sum(median))."""
        factor = self.resampled_time_factor(rng, replicates)
        return self.time_s * factor if quantity == "time" else self.fraction / factor


def _positive(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _region(record: Mapping[str, Any]) -> tuple[float, tuple[np.ndarray, ...]] | None:
    t_min = record.get("t_min_s")
    if not _positive(t_min):
        return None
    timing = record.get("timing") or {}
    parts = [timing.get("samples_s") or []]
    if not parts[0]:  # timed as several call sites: each part keeps its own rounds
        parts = [(p.get("timing") or {}).get("samples_s") or [] for p in record.get("parts") or []]
    arrays = tuple(np.asarray(p, dtype=float) for p in parts if p)
    if not arrays or any(not np.all(a > 0) for a in arrays):
        time_s = record.get("time_s") or timing.get("median_s")
        if not _positive(time_s):
            return None
        arrays = (np.asarray([float(time_s)]),)  # no rounds kept: a fixed time
    return float(t_min), arrays


@dataclass(frozen=True)
class Spread:
    """Session-to-session spread (sd of the log value) and the degrees of freedom it was measured with."""

    sigma: float
    df: int
    source: str  # "own": the test's baseline sessions; "pooled": the machine's tests in the history

    def describe(self) -> str:
        where = "this test's sessions" if self.source == "own" else "pooled over this machine's tests"
        return f"session-to-session sd {self.sigma:.1%} ({where}, Student t with {self.df} df)"


def own_spread(values: Sequence[float] | np.ndarray) -> Spread | None:
    """The spread of a test's baseline sessions when there are enough of them."""
    if len(values) < MIN_OWN_SESSIONS:
        return None
    return Spread(float(np.std(np.log(values), ddof=1)), len(values) - 1, "own")


def pooled_spread(groups: Sequence[Sequence[float]]) -> Spread | None:
    """The spread pooled over tests (each group: one test's values in its sessions): the df-weighted mean of
    their variances of the log value. None with fewer than :data:`MIN_POOLED_DF` degrees of freedom."""
    sums, df = 0.0, 0
    for values in groups:
        logs = np.log([v for v in values if _positive(v)])
        if len(logs) >= 2:
            sums += float(np.sum((logs - logs.mean()) ** 2))
            df += len(logs) - 1
    if df < MIN_POOLED_DF:
        return None
    return Spread(math.sqrt(sums / df), df, "pooled")


def pooled_over(records_by_test: Iterable[Iterable[TestRecord]], quantity: str) -> Spread | None:
    """:func:`pooled_spread` of ``quantity`` over each test's records (its sessions' test records)."""
    groups = [[m.value(quantity) for m in map(Measurement.from_record, records) if m is not None]
              for records in records_by_test]
    return pooled_spread(groups)


class SpreadDict(TypedDict):
    sigma: float
    df: int
    source: str


class _ChangeBase(TypedDict):
    now: float
    reference: float
    ratio: float
    ci: list[float] | None
    verdict: str
    spread: SpreadDict | None


class ChangeDict(_ChangeBase, total=False):
    """A quantity's change as results.json writes it (``compare.changes.time``, ``baseline.changes.fraction``)."""

    claim_ci: list[float]
    equivalence_ci: list[float]
    claim_level: float


@dataclass(frozen=True)
class Change:
    """One quantity (time per call, or fraction) now against its baseline."""

    quantity: str  # "time" or "fraction"
    now: float
    reference: float  # median of the baseline sessions
    ratio: float  # now / reference
    ci: tuple[float, float] | None  # None: inconclusive, no spread to judge with
    spread: Spread | None
    verdict: str  # "worse", "better", "same", "noisy" (worse beyond tolerance, not significant), "inconclusive"
    claim_ci: tuple[float, float] | None = None  # A/B: the claim interval "worse"/"better" must clear 1 with
    equivalence_ci: tuple[float, float] | None = None  # A/B: the 90 % interval "same" needed inside the band
    claim_level: float | None = None  # A/B: ``claim_ci``'s level (ab.paired_stats.claim_confidence)

    def to_dict(self) -> ChangeDict:
        out: ChangeDict = {
            "now": self.now, "reference": self.reference, "ratio": self.ratio,
            "ci": None if self.ci is None else list(self.ci), "verdict": self.verdict,
            "spread": None if self.spread is None else {"sigma": self.spread.sigma, "df": self.spread.df,
                                                        "source": self.spread.source}}
        if self.claim_ci is not None:
            out["claim_ci"] = list(self.claim_ci)
        if self.equivalence_ci is not None:
            out["equivalence_ci"] = list(self.equivalence_ci)
        if self.claim_level is not None:
            out["claim_level"] = self.claim_level
        return out


def seed_for(nodeid: str) -> int:
    """The same test draws the same replicates in every run: a gate's decision is reproducible."""
    return zlib.crc32(nodeid.encode("utf-8", "surrogatepass"))


def compare_quantity(current: Measurement, baseline: Sequence[Measurement], quantity: str, tolerance: float, *,
                     pooled: Spread | None = None, seed: int = 0, replicates: int = REPLICATES) -> Change:
    """Ratio now / baseline of ``quantity`` with its bootstrap interval, and its verdict.

    ``worse`` is a time ratio above ``1 + tolerance`` (a fraction ratio below ``1 - tolerance``) whose interval
    excludes 1; ``noisy`` the same ratio without significance; ``better`` the mirror image; else ``same``.

    Each replicate: draw K baseline sessions with replacement, resample the rounds of each, take the median of
    their values; resample the current rounds; multiply by a session effect exp(s * t) with s the sd of the
    log value between sessions and t Student's with its degrees of freedom (the predictive spread of a new
    session; few sessions, wide tails). s is the test's own with at least MIN_OWN_SESSIONS sessions, else
    ``pooled``; with neither the verdict is ``inconclusive`` and there is no interval.
    """
    if not baseline:
        raise ValueError("compare_quantity() needs at least one baseline measurement")
    values = np.array([m.value(quantity) for m in baseline])
    center = float(np.median(values))
    now = current.value(quantity)
    ratio = now / center
    spread = own_spread(values) or pooled
    if spread is None:
        return Change(quantity, now, center, ratio, None, None, "inconclusive")
    rng = np.random.default_rng(seed + (0 if quantity == "fraction" else 1))
    k = len(baseline)
    per_session = np.stack([m.resample(rng, replicates, quantity) for m in baseline])  # (K, replicates)
    drawn = rng.integers(0, k, size=(replicates, k))
    base = np.median(per_session[drawn, np.arange(replicates)[:, None]], axis=1)
    effect = spread.sigma * rng.standard_t(spread.df, size=replicates)
    ratios = current.resample(rng, replicates, quantity) / base * np.exp(effect)
    tail = (1 - CONFIDENCE) / 2 * 100
    lo, hi = (float(v) for v in np.percentile(ratios, [tail, 100 - tail]))
    # worse is up for time, down for the fraction: judge both on the ratio oriented so that up is worse
    worse_ratio, worse_lo, worse_hi = (ratio, lo, hi) if quantity == "time" else (1 / ratio, 1 / hi, 1 / lo)
    limit = 1 + tolerance if quantity == "time" else 1 / (1 - tolerance)
    if worse_ratio > limit:
        verdict = "worse" if worse_lo > 1 else "noisy"
    elif worse_ratio < 1 / limit and worse_hi < 1:
        verdict = "better"
    else:
        verdict = "same"
    return Change(quantity, now, center, ratio, (lo, hi), spread, verdict)


def describe_interval(change: Change) -> str:
    """``time ratio now/baseline 1.912, 95% CI [1.899, 1.916]``, or why there is no interval."""
    if change.ci is None:
        return f"{change.quantity} ratio now/baseline {change.ratio:.3f}: inconclusive"
    lo, hi = change.ci
    return f"{change.quantity} ratio now/baseline {change.ratio:.3f}, {CONFIDENCE:.0%} CI [{lo:.3f}, {hi:.3f}]"


def describe_method(change: Change, replicates: int = REPLICATES) -> str:
    """How the interval was found (one sentence for the statistic field)."""
    if change.spread is None:
        return needed_text()
    return (f"hierarchical bootstrap, {replicates} replicates: baseline sessions then their rounds, current "
            f"rounds; {change.spread.describe()}")


def needed_text(sessions: int | None = None) -> str:
    more = "" if sessions is None else f" ({MIN_OWN_SESSIONS - sessions} more of this test)"
    return (f"too few sessions to measure the spread: a test needs {MIN_OWN_SESSIONS} baseline sessions{more}, "
            f"or the machine's history {MIN_POOLED_DF} degrees of freedom over its tests")
