"""The record both gates share: a test's time per call, counted work and fraction against a reference (its
baseline sessions, or the base commit measured beside it), each with its verdict, the test's one verdict, and
the sentence that explains it in roofline terms. Plain Python; every output renders this record.

The roofline identity ties the three together: time = t_min / fraction, and t_min scales with the work at
fixed roofs. So a slower test either does more work (at the same fraction), or the same work less efficiently
(a lower fraction), or both; the explanation says which.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from pytest_roofline.gates.baseline_stats import Change, ChangeDict, Measurement, Spread, compare_quantity
from pytest_roofline.measure.work import WorkChange, WorkChangeDict, usual_work, work_change
from pytest_roofline.record.outcomes import GateVerdict

QUANTITIES = ("time", "fraction", "work")
DEFAULT_FAIL_ON = ("time", "fraction")


class Changes(TypedDict):
    time: ChangeDict
    fraction: ChangeDict
    work: WorkChangeDict | None


class ComparisonDict(TypedDict):
    """A gate's comparison as results.json writes it (the baseline and A/B blocks start with it)."""

    verdict: GateVerdict
    failed_on: list[str]
    fail_on: list[str]
    explanation: str
    changes: Changes


@dataclass(frozen=True)
class TestComparison:
    __test__ = False  # not a test class, despite its name

    against: str  # "the baseline" or "REF <commit>": how the explanation names the reference
    time: Change
    fraction: Change
    work: WorkChange | None  # None when either side has no counts
    fail_on: tuple[str, ...]
    verdict: GateVerdict
    failed_on: tuple[str, ...]  # the quantities that fail the test (empty: it passes this gate)
    explanation: str

    def to_dict(self) -> ComparisonDict:
        return {"verdict": self.verdict, "failed_on": list(self.failed_on), "fail_on": list(self.fail_on),
                "explanation": self.explanation,
                "changes": {"time": self.time.to_dict(), "fraction": self.fraction.to_dict(),
                            "work": None if self.work is None else self.work.to_dict()}}


@dataclass(frozen=True)
class Tolerances:
    max_drop: float  # of the fraction
    max_slowdown: float  # of the time per call
    fail_on: tuple[str, ...]


def compare_test(current: Measurement, baseline: Sequence[Measurement], tolerances: Tolerances, *,
                 bound: str | None, pooled: dict[str, Spread | None], seed: int,
                 against: str = "the baseline") -> TestComparison:
    """A test measured now against its baseline sessions: time, fraction (baseline_stats) and work, combined.
    ``pooled``: the machine's pooled spread per quantity, for a test with too few sessions of its own."""
    time = compare_quantity(current, baseline, "time", tolerances.max_slowdown, pooled=pooled.get("time"),
                            seed=seed)
    fraction = compare_quantity(current, baseline, "fraction", tolerances.max_drop, pooled=pooled.get("fraction"),
                                seed=seed)
    usual = usual_work([m.work for m in baseline])
    work = None if current.work is None or usual is None else work_change(current.work, usual, bound)
    return combine(against, time, fraction, work, tolerances.fail_on)


def combine(against: str, time: Change, fraction: Change, work: WorkChange | None,
            fail_on: Sequence[str]) -> TestComparison:
    """The test's verdict from its three quantities and the quantities it is failed on."""
    worse = [q for q, c in (("time", time), ("fraction", fraction)) if c.verdict == "worse"]
    if work is not None and work.verdict != "same":
        worse.append("work")
    failed = tuple(q for q in worse if q in fail_on)
    verdict: GateVerdict
    if failed:
        verdict = "regressed"
    elif worse:
        verdict = "changed"
    elif "noisy" in (time.verdict, fraction.verdict):
        verdict = "noisy"
    elif "inconclusive" in (time.verdict, fraction.verdict):
        verdict = "inconclusive"
    elif "better" in (time.verdict, fraction.verdict):
        verdict = "improved"
    else:
        verdict = "steady"
    return TestComparison(against, time, fraction, work, tuple(fail_on), verdict, failed,
                          explain(against, time, fraction, work))


def _fraction_text(fraction: Change) -> str:
    if fraction.verdict in ("same", "inconclusive") or abs(fraction.ratio - 1) < 0.005:
        return f"the same fraction ({fraction.now:.2f})"
    return f"fraction {fraction.reference:.2f} → {fraction.now:.2f}"


def ratio_text(ratio: float) -> str:
    """``2.00``, or as many more digits as it takes not to print 1.00 for a ratio that is not 1."""
    for digits in (2, 3, 4, 5, 6):
        text = f"{ratio:.{digits}f}"
        if text != f"{1:.{digits}f}" or ratio == 1:
            return text
    return f"{ratio:.6g}"


def explain(against: str, time: Change, fraction: Change, work: WorkChange | None) -> str:
    """"time ×1.95 since the baseline: work ×2.00 at the same fraction (0.80)", "time ×1.25 since the
    baseline at the same work: fraction 0.80 → 0.64"."""
    head = f"time ×{time.ratio:.2f} {'since' if against == 'the baseline' else 'against'} {against}"
    same_fraction = _fraction_text(fraction).startswith("the same")
    if work is None:
        return f"{head}; {_fraction_text(fraction)} (work not counted on both sides)"
    if work.verdict == "same":
        if same_fraction:
            return f"{head} at the same work and {_fraction_text(fraction)}"
        return f"{head} at the same work: {_fraction_text(fraction)}"
    scale = "changed" if work.ratio is None else f"×{ratio_text(work.ratio)}"
    if work.ratio == 1.0:  # the count that binds is the same: others moved ("work ×1.00" would read as none)
        return f"{head} at the same work where it binds (other counts moved): {_fraction_text(fraction)}"
    if work.verdict == "changed":
        scale = f"changed (some counts up, others down; {scale} where it binds)"
    joiner = "at" if same_fraction else "and"
    return f"{head}: work {scale} {joiner} {_fraction_text(fraction)}"
