"""Fakes the A/B tests share: process pairs that return set times, and a call site's records."""


from __future__ import annotations

from typing import Any

from pytest_roofline.ab.paired_stats import (
    between_pairs,
)
from pytest_roofline.ab.pairs import measure_site
from pytest_roofline.measure.timing import TimingPolicy
from pytest_roofline.record.ab_record import ABRecord

ab = ABRecord.from_dict  # a block as results.json holds it



class FakePair:
    """A process pair whose sides take ``this_s`` and ``ref_s`` per call, on a clock they advance."""

    def __init__(self, this_s: float, ref_s: float, clock: list[float], alloc_first: str = "this") -> None:
        self.this_s, self.ref_s, self.clock, self.alloc_first = this_s, ref_s, clock, alloc_first
        self.turns: list[str] = []

    def _turn(self, side: str, seconds: float, op: str, batch: int, rewarm: bool = False) -> tuple[float, int]:
        self.clock[0] += seconds * (batch + (1 if rewarm else 0))
        if op == "call":
            self.turns.append(side)
        return seconds, 0

    def this_turn(self, op: str, batch: int, rewarm: bool = True) -> tuple[float, int]:
        return self._turn("this", self.this_s, op, batch, rewarm)

    def ref_turn(self, op: str, batch: int, rewarm: bool = True) -> tuple[float, int]:
        return self._turn("ref", self.ref_s, op, batch, rewarm)


def site(ratios: list[float], seconds: float = 0.01, tolerance: float | None = 0.03) -> tuple[Any, list[FakePair]]:
    clock = [0.0]
    pairs = [FakePair(seconds * r, seconds, clock) for r in ratios]
    result = measure_site(pairs, TimingPolicy(max_time_s=1.0), tolerance, seed=1, clock=lambda: clock[0])
    return result, pairs


def twelve(ratio: float, spread: float = 0.01) -> list[float]:
    """Twelve process pairs (the last look) about ``ratio``: ``ratio`` times 1 - spread, 1, 1 + spread, four
    times over."""
    return [ratio * (1 + d) for d in (-spread, 0.0, spread)] * 4


def region(ratio: float, pair_ratios: list[float], flops: float = 1e8, ref_flops: float = 1e8,
           this_time: float | None = None) -> dict[str, Any]:
    top = between_pairs(pair_ratios)
    ref = {"time_s": 1e-3, "t_min_s": 0.5e-3 * ref_flops / 1e8, "flops_by_precision": {"fp32": ref_flops},
           "bytes": {}}
    return {"label": "step", "time_s": this_time or 1e-3 * ratio, "t_min_s": 0.5e-3 * flops / 1e8,
            "flops_by_precision": {"fp32": flops}, "bytes": {},
            "compare": {"compared": True, "ratio": top.ratio, "ci": list(top.ci or ()),
                        "claim_ci": list(top.claim_ci or ()), "equivalence_ci": list(top.equivalence_ci or ()),
                        "claim_level": top.claim_level, "last_look": 12, "pairs": 30,
                        "pair_ratios": pair_ratios, "between_cv": top.cv, "this_time_s": 1e-3 * ratio,
                        "ref_time_s": 1e-3, "within": [{"ratio": r, "ci": None, "turns": 10} for r in pair_ratios],
                        "ref": ref}}
