"""A test's counted work (FLOPs per precision, bytes per memory level) and how it changed against a reference.

Counts are compared exactly: declared counts are the test's own numbers, and the analytic counter and ncu count
the same ops the same way every run, so any difference is a change of the work, not noise. Plain Python.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from pytest_roofline.record.tests import TestRecord

# Counts are floats in the records (JSON); two counts of the same work agree far closer than this.
EXACT = 1e-9


class WorkDict(TypedDict):
    flops: dict[str, float]  # per precision
    bytes: dict[str, float]  # per memory level


@dataclass(frozen=True)
class Work:
    flops: Mapping[str, float]  # per precision
    bytes: Mapping[str, float]  # per memory level

    @classmethod
    def from_record(cls, record: TestRecord) -> Work | None:
        """From a results.json / history test record (``flops_by_precision``, ``bytes``); None without counts."""
        return None if record.flops_by_precision is None else cls.of(record.flops_by_precision, record.bytes)

    @classmethod
    def of(cls, flops: Mapping[str, float], moved: Mapping[str, float]) -> Work | None:
        """The work of these counts (zeros left out); None when nothing was counted."""
        flops = {k: v for k, v in flops.items() if v > 0}
        moved = {k: v for k, v in moved.items() if v > 0}
        return cls(flops, moved) if flops or moved else None

    @property
    def total_flops(self) -> float:
        return sum(self.flops.values())

    def to_dict(self) -> WorkDict:
        return {"flops": dict(self.flops), "bytes": dict(self.bytes)}


def usual_work(works: Sequence[Work | None]) -> Work | None:
    """The work most of the baseline sessions counted (the latest among equals): one session with other work
    (a change being judged, or accepted a session ago) does not become the reference until most have it."""
    counted = [w for w in works if w is not None]
    best: Work | None = None
    best_count = 0
    for work in reversed(counted):  # latest first, so a tie keeps the latest
        count = sum(1 for w in counted if _same(w.flops, work.flops) and _same(w.bytes, work.bytes))
        if count > best_count:
            best, best_count = work, count
    return best


def _same(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    return a.keys() == b.keys() and all(math.isclose(a[k], b[k], rel_tol=EXACT) for k in a)


class WorkChangeDict(TypedDict):
    now: WorkDict
    reference: WorkDict
    verdict: str
    ratio: float | None


@dataclass(frozen=True)
class WorkChange:
    now: Work
    reference: Work
    verdict: str  # "same", "more", "less", "changed" (some counts up, others down)
    ratio: float | None  # the scale of the change in the term that binds (FLOPs or the bound level's bytes)

    def to_dict(self) -> WorkChangeDict:
        return {"now": self.now.to_dict(), "reference": self.reference.to_dict(), "verdict": self.verdict,
                "ratio": self.ratio}


def work_change(now: Work, reference: Work, bound: str | None) -> WorkChange:
    """How the work changed. The ratio is taken on what bounds the test now (``compute:<p>``: all FLOPs;
    ``memory:<level>``: that level's bytes), so "work x2.00" reads in the terms of the roof that binds."""
    if _same(now.flops, reference.flops) and _same(now.bytes, reference.bytes):
        return WorkChange(now, reference, "same", 1.0)
    ratio = _bound_ratio(now, reference, bound)
    keys = set(now.flops) | set(reference.flops)
    ups = [now.flops.get(k, 0.0) / reference.flops[k] if reference.flops.get(k) else math.inf for k in keys]
    levels = set(now.bytes) | set(reference.bytes)
    ups += [now.bytes.get(k, 0.0) / reference.bytes[k] if reference.bytes.get(k) else math.inf for k in levels]
    if all(u >= 1 - EXACT for u in ups):
        verdict = "more"
    elif all(u <= 1 + EXACT for u in ups):
        verdict = "less"
    else:
        verdict = "changed"
    return WorkChange(now, reference, verdict, ratio)


def _bound_ratio(now: Work, reference: Work, bound: str | None) -> float | None:
    kind, _, name = (bound or "").partition(":")
    if kind == "memory" and reference.bytes.get(name):
        return now.bytes.get(name, 0.0) / reference.bytes[name]
    if reference.total_flops > 0:
        return now.total_flops / reference.total_flops
    common = [k for k in now.bytes if reference.bytes.get(k)]
    if not common:
        return None
    level = max(common, key=lambda k: reference.bytes[k])  # no FLOPs: the level that moved the most
    return now.bytes[level] / reference.bytes[level]
