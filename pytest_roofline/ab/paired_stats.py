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
from functools import lru_cache

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
    # the wider interval a "slower" or "faster" must clear 1 with (claim_confidence); None: ``ci`` itself
    claim_ci: tuple[float, float] | None = None
    # the interval "unchanged" must lie inside the band with (EQUIVALENCE_CONFIDENCE); None: ``ci`` itself
    equivalence_ci: tuple[float, float] | None = None
    claim_level: float | None = None  # ``claim_ci``'s level; None: a record's from before (OLD_CLAIM_CONFIDENCE)

    @property
    def claim_interval(self) -> tuple[float, float] | None:
        return self.claim_ci if self.claim_ci is not None else self.ci

    @property
    def equivalence_interval(self) -> tuple[float, float] | None:
        return self.equivalence_ci if self.equivalence_ci is not None else self.ci

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


def inside_band(ratio: float, tolerance: float) -> bool:
    """Whether ``ratio`` lies inside the tolerance band ``[1 / (1 + tolerance), 1 + tolerance]``."""
    return 1 / (1 + tolerance) <= ratio <= 1 + tolerance


# --- the top level: process pairs (docs/ab-compare.md, "Process pairs") -------------------------------------------
# Calls inside one pair of processes share that pair's state (where its buffers landed, huge pages, the library's
# algorithm choice), so the calls' interval above is blind to it. The unit that varies is the process pair: each
# gives one Hodges-Lehmann log ratio, and the ratio's interval is Student's t over those.
#
# Two levels: "unchanged" needs the 90 % interval inside the band (95 % below 4 pairs; below); "slower" or "faster"
# needs the claim interval (claim_confidence, below) to exclude 1. Where the pairs vary by more than the band
# (launch-bound kernels on a GPU: 4-10 % between pairs against a 3 % band), a 95 % interval excludes 1 in about 5 %
# of A/A comparisons, and each of those was a false alarm (docs/ab-compare.md, "Measured"). Up to 12 pairs buy back
# the power. The 95 % interval (``ci``) is the one reported.
# The claim's error is spent over the looks, so that it holds by construction, not only as measured. A call site is
# looked at after each process pair from the third to the pool's last (ab.pairs.measure_site), and the two robust
# intervals are tried once at the end; each is one more chance to claim a change in identical code. At 99 % a
# look, identical code was claimed in 2.5 % of simulated call sites whose pairs spread 8 % (benchmarks/ab_rules.py):
# the looks add up. The rule is Haybittle and Peto's: the looks before the last share INTERIM_ERROR (each claims
# only what is far beyond doubt: a large change still stops early), the two robust intervals ROBUST_ERROR each,
# and the last look, where a change of the band's size is decided, what is left. By the union bound a call site
# claims a change in identical code at most CLAIM_ERROR of the time ("slower", the one that fails a test, at most
# half that), however many looks it takes. A site that ends before its last look (the budget, or no room for
# more twins) is judged at the interim level: stricter, never looser.
CLAIM_ERROR = 0.01
INTERIM_ERROR = 0.001
ROBUST_ERROR = 0.001
LAST_ERROR = CLAIM_ERROR - INTERIM_ERROR - 2 * ROBUST_ERROR  # 0.007: the last look's t-interval, at 99.3 %
FIRST_LOOK = 3  # the fewest process pairs a site is judged on (ab.pairs.MIN_PROCESS_PAIRS)
# The pool's default size, the last look (ab.pairs.MAX_PROCESS_PAIRS): twelve pairs of a quarter of the budget
# each, not eight of a half: the pairs' own state (where the buffers landed: a 64 MiB copy's pairs 2-3 % apart) is
# sampled only by more pairs, and the copy's last interval narrows from about ±2.8 % to ±2.4 % (simulated from the
# copy's measured pair and turn spreads).
LAST_LOOK = 12
OLD_CLAIM_CONFIDENCE = 0.99  # the claim interval's level in records written before the looks shared the error


def claim_confidence(pairs: int, last: int = LAST_LOOK) -> float:
    """The claim interval's level at the look after ``pairs`` process pairs of a call site whose last look is at
    ``last`` pairs (the pool's size): ``1 - LAST_ERROR`` there, ``1 - INTERIM_ERROR / (last - FIRST_LOOK)``
    before (99.99 % with the default pool of 12)."""
    if pairs >= last:
        return 1 - LAST_ERROR
    return 1 - INTERIM_ERROR / max(1, last - FIRST_LOOK)


def level_text(level: float | None) -> str:
    """A claim interval's level as the reports write it (``99.3%``, ``99.99%``); None: a record's from before
    the looks shared the error (99 %)."""
    value = 100 * (OLD_CLAIM_CONFIDENCE if level is None else level)
    return f"{value:.4g}%" if value < 99.995 else f"{value:.3f}%"


# "Unchanged" is an equivalence claim: the two one-sided tests (TOST) at 5 % each, "not slower by the band" and "not
# faster by it", hold together exactly when the 90 % interval lies inside the band (as bioequivalence is judged).
# The 95 % interval allowed each side half that error (2.5 %) and cost identical code up to 14 % more pairs (copy,
# GEMM, x*2+y; kept sessions replayed). From 4 pairs on: three pairs agree by chance too often (a 5 % planted copy's
# first three read 1.025, 1.012, 1.015: inside the band at 90 %, not at 95 %).
EQUIVALENCE_CONFIDENCE = 0.90
EQUIVALENCE_MIN_PAIRS = 4

# two-sided 95 % quantiles of Student's t by degrees of freedom (scipy.stats.t.ppf(0.975, df)), to df 30
_T975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
         2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
         2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272)


# the one-sided 95 % quantiles (scipy.stats.t.ppf(0.95, df)): the 90 % two-sided interval, to df 30
_T95 = (6.313752, 2.919986, 2.353363, 2.131847, 2.015048, 1.943180, 1.894579, 1.859548, 1.833113, 1.812461,
        1.795885, 1.782288, 1.770933, 1.761310, 1.753050, 1.745884, 1.739607, 1.734064, 1.729133, 1.724718,
        1.720743, 1.717144, 1.713872, 1.710882, 1.708141, 1.705618, 1.703288, 1.701131, 1.699127, 1.697261)
Z95 = 1.6448536269514722


def t95(df: int) -> float:
    """The 0.95 quantile of Student's t with ``df`` degrees of freedom (the normal one beyond 30)."""
    if df < 1:
        raise ValueError(f"t95() needs df >= 1, got {df}")
    return _T95[df - 1] if df <= len(_T95) else Z95


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (the normal one beyond 30)."""
    if df < 1:
        raise ValueError(f"t975() needs df >= 1, got {df}")
    return _T975[df - 1] if df <= len(_T975) else Z


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz), for
    ``x < (a + 1) / (a + b + 2)``."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    value = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            value *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return value


def beta_regularized(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for ``0 <= x <= 1``."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def t_upper_tail(t: float, df: int) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom, ``t >= 0``."""
    return 0.5 * beta_regularized(df / 2, 0.5, df / (df + t * t))


@lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom, ``0.5 <= p < 1`` (bisection on
    :func:`t_upper_tail`)."""
    if df < 1 or not 0.5 <= p < 1:
        raise ValueError(f"t_quantile() needs df >= 1 and 0.5 <= p < 1, got {p}, {df}")
    tail = 1 - p
    low, high = 0.0, 1.0
    while t_upper_tail(high, df) > tail:
        low, high = high, 2 * high
    for _ in range(200):
        middle = (low + high) / 2
        if t_upper_tail(middle, df) > tail:
            low = middle
        else:
            high = middle
        if high - low < 1e-10 * high:
            break
    return (low + high) / 2


def t_two_sided(level: float, df: int) -> float:
    """The quantile of Student's t a two-sided interval at ``level`` is built with."""
    return t_quantile(1 - (1 - level) / 2, df)


@dataclass(frozen=True)
class BetweenPairs:
    """The ratio over process pairs: exp(mean of the per-pair log ratios) with its 95 % t-interval (``ci``) and
    its claim interval (``claim_ci``, at ``claim_level``: :func:`claim_confidence`), None below two pairs;
    ``ratios``: each pair's ratio; ``cv``: their between-pair spread (sample standard deviation of the log
    ratios, about the CV of the ratios). ``interval``: "t", or where the claim t-interval reaches 1 and a robust
    one does not (:func:`between_pairs`) "signed-rank" (then ``ratio`` is the Hodges-Lehmann estimate over the pairs) or
    "trimmed-mean" (Yuen's 20 % trimmed mean)."""

    ratio: float
    ci: tuple[float, float] | None
    ratios: tuple[float, ...]
    cv: float
    claim_ci: tuple[float, float] | None = None
    interval: str = "t"
    equivalence_ci: tuple[float, float] | None = None  # what "unchanged" needs inside the band; None: ``ci``
    claim_level: float | None = None

    @property
    def pairs(self) -> int:
        return len(self.ratios)

    def as_paired(self) -> PairedRatio:
        """The same numbers as a :class:`PairedRatio` (``pairs``: process pairs), for :func:`.verdict.verdict`."""
        return PairedRatio(self.ratio, self.ci, self.pairs, self.claim_ci, self.equivalence_ci, self.claim_level)


@lru_cache(maxsize=64)
def signed_rank_critical(n: int, alpha: float) -> int:
    """The largest ``w`` with P(W <= w) <= alpha / 2 for the Wilcoxon signed-rank statistic of ``n`` values under
    the null (exact, by counting the subsets of ranks with each sum); -1 where no ``w`` is that rare (n = 8 is the
    smallest with one at alpha = 0.01). The interval for the centre is the ``w``-th smallest and largest Walsh
    averages (0-based)."""
    counts = [1]  # counts[s]: subsets of the ranks seen so far summing to s
    for rank in range(1, n + 1):
        grown = counts + [0] * rank
        for total, count in enumerate(counts):
            grown[total + rank] += count
        counts = grown
    below, critical = 0, -1
    for w, count in enumerate(counts):
        below += count
        if below / 2**n > alpha / 2:
            break
        critical = w
    return critical


def _signed_rank_top(logs: Sequence[float], t_top: BetweenPairs) -> BetweenPairs | None:
    """The Hodges-Lehmann estimate over the pairs with its exact signed-rank intervals (95 %, and at
    ``1 - ROBUST_ERROR`` for the claim), where the claim one excludes 1; else None. At that level it excludes 1
    only from 11 pairs, all on one side of 1."""
    k = len(logs)
    c99, c95 = signed_rank_critical(k, ROBUST_ERROR), signed_rank_critical(k, 1 - CONFIDENCE)
    if c99 < 0 or c95 < 0:
        return None
    walsh = walsh_averages(np.asarray(logs, dtype=float))
    lo, hi = float(walsh[c99]), float(walsh[len(walsh) - 1 - c99])
    if lo <= 0 <= hi:
        return None
    return BetweenPairs(math.exp(float(np.median(walsh))),
                        (math.exp(float(walsh[c95])), math.exp(float(walsh[len(walsh) - 1 - c95]))),
                        t_top.ratios, t_top.cv, (math.exp(lo), math.exp(hi)), "signed-rank", t_top.equivalence_ci,
                        1 - ROBUST_ERROR)


# Yuen's trimmed mean: the fewest pairs it is tried on (as the signed-rank interval), the share trimmed from each end,
# and how far (in robust standard deviations, 1.4826 x the median absolute deviation) a pair must lie from the
# pairs' median to count as far from the others
TRIMMED_MIN_PAIRS = 8
TRIM_SHARE = 0.2
FAR_PAIR = 4.0


def far_pair(logs: Sequence[float], robust_sds: float = FAR_PAIR) -> bool:
    """Whether some value lies more than ``robust_sds`` robust standard deviations from the values' median (a
    process pair whose buffers landed badly); False where half the values or more are equal (no spread to judge
    by)."""
    if len(logs) < 3:
        return False
    centre = float(np.median(logs))
    deviations = np.abs(np.asarray(logs, dtype=float) - centre)
    scale = 1.4826 * float(np.median(deviations))  # the normal law's sd from its median absolute deviation
    return scale > 0 and float(deviations.max()) > robust_sds * scale


def yuen_interval(logs: Sequence[float], trim: float = TRIM_SHARE) -> tuple[float, float, float] | None:
    """Yuen's trimmed mean of ``logs`` with the half-widths of its 95 % and claim (``1 - ROBUST_ERROR``)
    intervals: ``g = floor(trim k)`` values cut from each end, the standard error from the winsorized variance
    (each cut value set to the nearest kept one), ``sqrt((k - 1) s_w^2 / (h (h - 1)))`` with ``h = k - 2g`` kept,
    Student's t on ``h - 1`` degrees of freedom. None below 3 values kept."""
    values = sorted(logs)
    k = len(values)
    g = int(trim * k)
    h = k - 2 * g
    if h < 3:
        return None
    kept = values[g:k - g]
    mean = sum(kept) / h
    winsorized = [min(max(v, kept[0]), kept[-1]) for v in values]
    w_mean = sum(winsorized) / k
    w_var = sum((v - w_mean) ** 2 for v in winsorized) / (k - 1)
    se = math.sqrt((k - 1) * w_var / (h * (h - 1)))
    return mean, t975(h - 1) * se, t_two_sided(1 - ROBUST_ERROR, h - 1) * se


def _trimmed_top(logs: Sequence[float], t_top: BetweenPairs) -> BetweenPairs | None:
    """Yuen's trimmed mean over the pairs with its intervals (95 %, claim), where some pair lies far from the
    others (:func:`far_pair`) and the claim interval excludes 1; else None."""
    if len(logs) < TRIMMED_MIN_PAIRS or not far_pair(logs):
        return None
    found = yuen_interval(logs)
    if found is None:
        return None
    mean, half, claim = found
    if mean - claim <= 0 <= mean + claim:
        return None
    return BetweenPairs(math.exp(mean), (math.exp(mean - half), math.exp(mean + half)), t_top.ratios, t_top.cv,
                        (math.exp(mean - claim), math.exp(mean + claim)), "trimmed-mean", t_top.equivalence_ci,
                        1 - ROBUST_ERROR)


def _exp(log_ratio: float) -> float:
    """exp, held inside a float's range: two pairs' interval at an interim look spans thousands in the log."""
    return math.exp(max(-700.0, min(700.0, log_ratio)))


def between_pairs(ratios: Sequence[float], robust: bool = True, trimmed: bool = True,
                  tolerance: float | None = None, last: int = LAST_LOOK) -> BetweenPairs:
    """Mean of the log ratios and the t-intervals ``mean ± t(q, k-1) · sd / sqrt(k)`` over ``k`` pairs, at
    q = 0.975 (``ci``), at the look's claim level (``claim_ci``: :func:`claim_confidence` of ``k`` pairs of a
    call site whose last look is ``last``) and, from 4 pairs on, 0.95 (``equivalence_ci``: the 90 % interval
    that "unchanged" needs inside the band; None below 4 pairs, where ``ci`` is the one).

    A t-interval is widened by one pair far from the others (a process pair whose buffers landed badly: on the
    CPU VM a 64 MiB copy's pairs read 1.02-1.09 and one 1.207), and then a clear change reads ``inconclusive``.
    So, with ``robust``, from 8 pairs on, where the claim t-interval reaches 1:

    1. the exact signed-rank interval, where it excludes 1: the Hodges-Lehmann estimate over the pairs with its
       intervals. At the claim level that interval excludes 1 only from 12 pairs, all on one side of 1, which
       identical code does with probability 2/4096 (symmetric pairs). It does not help where the far pair lies on
       the other side of 1 from the rest: its n Walsh averages pull the interval's low end down with it.
    2. else, where some pair lies more than 4 robust standard deviations from the pairs' median
       (:func:`far_pair`), Yuen's 20 % trimmed mean and its interval (``trimmed``; :func:`yuen_interval`), where
       its claim interval excludes 1 (a copy planted 5 % slower: eleven pairs 1.018-1.136 and one 0.780).

    Each is one more chance of a claim on identical code, and has its share of :data:`CLAIM_ERROR`
    (:data:`ROBUST_ERROR`, whatever the look). Both are meant to be tried once per call site, on its final pairs
    (:func:`.pairs.measure_site` stops on the t-interval alone). They are for claims: with ``tolerance`` (the
    band's half width, ``--roofline-compare-max-slowdown``) a robust estimate inside the band leaves the t one
    (it could claim nothing, and "unchanged" is the t-interval's to say, as when the pairs stopped); a robust
    result keeps the t's ``equivalence_ci`` either way. ``robust``: False for the t-interval alone;
    ``trimmed``: False for the rule before the trimmed mean (benchmarks)."""
    logs = [math.log(r) for r in ratios if r > 0 and math.isfinite(r)]
    k = len(logs)
    if k == 0:
        return BetweenPairs(math.nan, None, (), math.nan)
    mean = sum(logs) / k
    if k < 2:
        return BetweenPairs(math.exp(mean), None, tuple(math.exp(v) for v in logs), math.nan)
    sd = math.sqrt(sum((v - mean) ** 2 for v in logs) / (k - 1))
    level = claim_confidence(k, last)
    half, claim, equivalence = (t * sd / math.sqrt(k) for t in (t975(k - 1), t_two_sided(level, k - 1), t95(k - 1)))
    top = BetweenPairs(math.exp(mean), (_exp(mean - half), _exp(mean + half)),
                       tuple(math.exp(v) for v in logs), sd, (_exp(mean - claim), _exp(mean + claim)),
                       equivalence_ci=(None if k < EQUIVALENCE_MIN_PAIRS else
                                       (math.exp(mean - equivalence), math.exp(mean + equivalence))),
                       claim_level=level)
    if robust and mean - claim <= 0 <= mean + claim:
        found = _signed_rank_top(logs, top) or (_trimmed_top(logs, top) if trimmed else None)
        if found is not None and (tolerance is None or not inside_band(found.ratio, tolerance)):
            return found
    return top


# --- the band's width: "auto" (docs/ab-compare.md) ------------------------------------------------------------------
# A band narrower than the process pairs' own spread flags identical code: simulated (benchmarks/ab_rules.py), a 2 %
# band where the pairs spread 3 % flags 0.9-1.1 % of A/A comparisons, a 3 % one 0.07-0.10 %; where they spread
# 2.5 % the 2 % band flags 0.35-0.5 %, at 2 % or less at most 0.2 %. Only the 2 % band catches a 3 % change (80-93 %
# at a 2-2.5 % spread against 48 %). So the default band is 2 % where a call site's pairs agree within 2.5 % (the
# standard deviation of their log ratios), 3 % where they spread more or are too few to say. The threshold was 2 %
# until the conv's pairs, which spread 1.9 % with heavy tails, took the 3 % band at two looks in five: drawn from its
# measured pairs, a 3 % change was caught in 80 % of comparisons at a 2 % threshold and 92 % at 2.5 %, identical
# code flagged in none of 2000 either way, and at a 3 % spread in 0.65 % against 0.35 %. A user's number is a
# fixed band.
AUTO_BANDS = (0.02, 0.03)  # (steady pairs, spread or too few)
AUTO_STEADY_CV = 0.025


def auto_band(cv: float) -> float:
    """The auto band for pairs whose log ratios spread ``cv`` (their sample standard deviation; nan below two)."""
    return AUTO_BANDS[0] if math.isfinite(cv) and cv <= AUTO_STEADY_CV else AUTO_BANDS[1]


def band_for(tolerance: float | None, result: BetweenPairs) -> float:
    """The band's half width: ``tolerance`` where the user gave one; None (auto): :func:`auto_band` of the pairs."""
    return tolerance if tolerance is not None else auto_band(result.cv)


# The auto band's narrow band makes "unchanged" dear where the pairs spread 2-2.5 %: its 90 % interval fits inside
# +-2 % only at about twelve pairs. A ratio within a third of the band of 1 whose 90 % interval lies inside the wide
# band will hardly be claimed on the narrow one (that needs the ratio past it): stop there. Simulated on measured
# pairs (a copy's, benchmarks/ab_rules.py): identical code's pairs 6.0 -> 5.4 at a 2 % spread, 7.1 -> 6.4 at
# 2.5 %, a 3 % change caught as often (91-92 %, 78 %), A/A flags as few.
SETTLED_SHARE = 1 / 3


def decided(result: BetweenPairs, tolerance: float, min_pairs: int, wide: float | None = None) -> bool:
    """The stopping rule over process pairs: at least ``min_pairs``, and the claim interval wholly
    beyond the band (slower or faster) or the equivalence one (90 %; 95 % below 4 pairs) wholly inside it
    (unchanged). ``wide``: under the auto band, its wide band; where ``tolerance`` is narrower, "unchanged" also
    stops from 4 pairs once the ratio lies within ``SETTLED_SHARE`` of the band of 1 and the 90 % interval
    inside the wide band."""
    if result.pairs < min_pairs or result.ci is None:
        return False
    lo, hi = result.equivalence_ci or result.ci
    claim_lo, claim_hi = result.claim_ci or result.ci
    band_lo, band_hi = 1 / (1 + tolerance), 1 + tolerance
    if claim_lo > band_hi or claim_hi < band_lo or (band_lo < lo and hi < band_hi):
        return True
    return settled(result, tolerance, wide)


def settled(result: BetweenPairs, tolerance: float, wide: float | None) -> bool:
    """Whether "unchanged" settles on the wide band (:func:`decided`): the ratio within ``SETTLED_SHARE`` of the
    narrow band ``tolerance`` of 1, the 90 % interval inside ``wide``. Such a call site is judged on ``wide``:
    its interval does not lie inside the narrow band, and "steady" there would claim more than the pairs say."""
    if wide is None or wide <= tolerance or result.equivalence_ci is None:
        return False
    lo, hi = result.equivalence_ci
    near_one = abs(math.log(result.ratio)) <= SETTLED_SHARE * math.log1p(tolerance)
    return near_one and 1 / (1 + wide) < lo and hi < 1 + wide


# --- a test of several call sites, and what its intervals say against a band ---------------------------------

def combined_ratio(sites: Sequence[tuple[float, PairedRatio]]) -> PairedRatio:
    """The test's ratio from its call sites' (REF's time, paired ratio): each weighted by its share of REF's
    time, on the log scale; the interval's ends combine the same way (as wide as the widest share allows)."""
    if len(sites) == 1:
        return sites[0][1]
    total = sum(t for t, _ in sites)
    if total <= 0 or any(r.ci is None for _, r in sites):
        return PairedRatio(math.exp(sum(math.log(r.ratio) * t for t, r in sites) / total) if total > 0 else
                           math.nan, None, sum(r.pairs for _, r in sites))
    log_ratio = sum(math.log(r.ratio) * t for t, r in sites) / total

    def combined(ends: Sequence[tuple[float, tuple[float, float]]]) -> tuple[float, float]:
        return (math.exp(sum(math.log(lo) * t for t, (lo, _) in ends) / total),
                math.exp(sum(math.log(hi) * t for t, (_, hi) in ends) / total))

    ci = combined([(t, r.ci) for t, r in sites if r.ci is not None])
    claim = combined([(t, r.claim_interval) for t, r in sites if r.claim_interval is not None])
    # the 90 % interval only where every site has one (a site of three pairs, or an older record, has its 95 % one)
    equivalence = (combined([(t, r.equivalence_ci) for t, r in sites if r.equivalence_ci is not None])
                   if all(r.equivalence_ci is not None for _, r in sites) else None)
    # the combined claim interval is no surer than its least sure site's
    levels = [OLD_CLAIM_CONFIDENCE if r.claim_level is None else r.claim_level for _, r in sites]
    return PairedRatio(math.exp(log_ratio), ci, sum(r.pairs for _, r in sites), claim, equivalence, min(levels))


def over_process_pairs(sites: Sequence[tuple[float, Sequence[float]]],
                       tolerance: float | None = None, last: int = LAST_LOOK) -> BetweenPairs | None:
    """The test's per-pair ratios from its call sites' (REF's time, per-pair ratios), each pair's log ratio
    weighted by the sites' shares of REF's time, and the interval over them (:func:`between_pairs`:
    t, or a robust one where that one claims a change beyond ``tolerance``; ``last``: the sites' last look);
    None unless every site was measured over the same number (at least two) of process pairs."""
    counts = {len(r) for _, r in sites}
    total = sum(t for t, _ in sites)
    if len(counts) != 1 or min(counts) < 2 or total <= 0:
        return None
    k = counts.pop()
    logs = [sum(t * math.log(r[j]) for t, r in sites) / total for j in range(k)]
    return between_pairs([math.exp(v) for v in logs], tolerance=tolerance, last=last)


NOTICE_SHARE = 1 / 3  # a move not failed on is said when its claim interval lies beyond this share of the band


def notice_edge(tolerance: float) -> float:
    """The ratio a third of the band above 1 (its mirror below 1 is ``1 / notice_edge``)."""
    return 1 + NOTICE_SHARE * tolerance


def sure_move(claim: tuple[float, float], tolerance: float) -> str | None:
    """``slower`` / ``faster`` where the claim interval lies wholly beyond a third of the band from 1
    (on the log scale), else None: a move too sure to be noise, said where the test is not failed on it."""
    edge = notice_edge(tolerance)
    if claim[0] > edge:
        return "slower"
    if claim[1] < 1 / edge:
        return "faster"
    return None


def interval_of(value: object) -> tuple[float, float] | None:
    """A record's interval (a JSON list of two numbers) as a pair of floats; None for anything else."""
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return float(value[0]), float(value[1])
    return None
