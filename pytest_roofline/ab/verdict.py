"""The A/B gate (``--roofline-compare``): a test's verdict against REF, decided in one place. Its call sites'
records are read once into a :class:`ComparedTest` (the paired ratios and intervals from :mod:`.paired_stats`),
:func:`decide` turns those numbers into the shared comparison record (``gates.comparison.TestComparison``), and
:func:`judge_compare` returns it with the failure message (:mod:`.report`) and artifacts. Called from
:func:`gates.judge.judge`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypedDict

from pytest_roofline.ab.paired_stats import (
    AUTO_BANDS,
    EQUIVALENCE_CONFIDENCE,
    LAST_LOOK,
    BetweenPairs,
    PairedRatio,
    between_pairs,
    combined_ratio,
    inside_band,
    interval_of,
    level_text,
    notice_edge,
    over_process_pairs,
    sure_move,
)
from pytest_roofline.ab.verdict_text import failure_message
from pytest_roofline.gates.baseline_gate import tolerances_of
from pytest_roofline.gates.baseline_stats import Change
from pytest_roofline.gates.comparison import TestComparison, Tolerances, combine
from pytest_roofline.gates.judgement import Judgement
from pytest_roofline.measure.work import Work, work_change
from pytest_roofline.model import sum_maps
from pytest_roofline.model.roofline import arithmetic_intensity
from pytest_roofline.output.session_output import all_kernels, test_artifacts
from pytest_roofline.record.ab_record import ABRecord, claim_level_of
from pytest_roofline.record.region_record import PairSummary, RegionRecord, SiteCompare
from pytest_roofline.record.tests import Measured
from pytest_roofline.session.settings import MarkerOptions
from pytest_roofline.session.state import RooflineState, TestEntry

if TYPE_CHECKING:
    from pathlib import Path


def verdict(result: PairedRatio, tolerance: float) -> str:
    """``slower``: the ratio is above ``1 + tolerance`` and its claim interval (:attr:`PairedRatio.claim_interval`)
    above 1; ``faster``: the mirror image; ``unchanged``: the ratio lies inside the tolerance band;
    ``inconclusive``: no interval (too few pairs), or a ratio beyond the band whose claim interval still
    reaches 1 (more pairs would say)."""
    claim = result.claim_interval
    if claim is None:
        return "inconclusive"
    lo, hi = claim
    if result.ratio > 1 + tolerance:
        return "slower" if lo > 1 else "inconclusive"
    if result.ratio < 1 / (1 + tolerance):
        return "faster" if hi < 1 else "inconclusive"
    return "unchanged"


_TIME_VERDICT = {"slower": "worse", "faster": "better", "unchanged": "same", "inconclusive": "inconclusive"}


def undecided(paired: PairedRatio, tolerance: float) -> bool:
    """A ratio inside the band whose equivalence interval (90 %; :attr:`.PairedRatio.equivalence_interval`) still
    reaches past it: the pairs cannot tell "unchanged" from a change of the size asked about (``inconclusive``,
    not ``steady``)."""
    interval = paired.equivalence_interval
    # the band written as verdict() writes it, so that the whole decision reads in this module
    return interval is None or not (1 / (1 + tolerance) <= interval[0] and interval[1] <= 1 + tolerance)


def time_verdict(paired: PairedRatio, tolerance: float) -> str:
    """``worse`` / ``better`` (beyond the band, the claim interval excluding 1), ``same`` (the equivalence
    interval inside the band), else ``inconclusive``."""
    said = verdict(paired, tolerance)
    if said == "unchanged" and undecided(paired, tolerance):
        said = "inconclusive"
    return _TIME_VERDICT[said]


PAIRS_DOMINATE = 4.0  # the pairs' spread past this many times what their turns explain: turns <= 1/4 of it


def what_narrows(spread: BetweenPairs | None, within: Sequence[PairSummary] | None) -> str:
    """Which level to sample more. The pairs' spread beyond what their own turns explain (a pair's state: where
    its buffers landed) is narrowed only by more pairs; the turns' part also by a longer budget per pair, and only
    where the pairs ran out of budget (not where their turns reached their own target). From the pairs' spread
    (``spread.cv``) and their own 95 % intervals; the general advice where they do not say."""
    pairs = "more process pairs (--roofline-compare-pairs)"
    either = f"{pairs} or a longer --roofline-max-time narrow it"
    records = list(within or ())
    if records and all("budget_limited" in w for w in records) and not any(w["budget_limited"] for w in records):
        return f"{pairs} narrow it (each pair's turns reached their own target)"
    own = [(math.log(ci[1]) - math.log(ci[0])) / (2 * 1.96) for w in records
           if (ci := w.get("ci")) and ci[0] > 0 and ci[1] > ci[0]]
    if spread is None or spread.pairs < 3 or len(own) != spread.pairs:
        return either
    turns = sum(se * se for se in own) / len(own)  # what the turns alone would spread the pairs by
    if spread.cv ** 2 > PAIRS_DOMINATE * turns:
        return (f"the pairs differ by more than their own turns explain: {pairs} narrow it most, a longer "
                f"--roofline-max-time hardly")
    return either


def inconclusive_note(paired: PairedRatio, record_ratios: Sequence[float] | None, tolerance: float,
                      within: Sequence[PairSummary] | None = None) -> str:
    """Why no verdict: the interval against the band, what the process pairs said, and what would narrow it."""
    if paired.ci is None:
        return (f"; inconclusive: too few process pairs for an interval ({paired.pairs}); more process pairs "
                f"(--roofline-compare-pairs) give one")
    spread = between_pairs(record_ratios, robust=False) if record_ratios else None
    listed = " ".join(f"{r:.3f}" for r in record_ratios or ())
    pairs = "" if spread is None else f"; process pairs {listed} (CV {spread.cv:.1%})"
    beyond = not inside_band(paired.ratio, tolerance)
    claim = paired.claim_ci
    if beyond and claim is not None:  # a change too uncertain to claim
        where = f"the {level_text(paired.claim_level)} interval [{claim[0]:.3f}, {claim[1]:.3f}] reaches 1"
    else:
        low, high = paired.equivalence_interval or paired.ci
        level = f"{EQUIVALENCE_CONFIDENCE:.0%} " if paired.equivalence_ci is not None else ""
        where = f"the {level}interval [{low:.3f}, {high:.3f}] reaches past the ±{tolerance:.0%} band"
        if claim is not None and (way := sure_move(claim, tolerance)) is not None:
            # a change about the band's size: not failed, and not to be read as "no change" either
            edge = notice_edge(tolerance)
            side = f"above ×{edge:.3f}" if way == "slower" else f"below ×{1 / edge:.3f}"
            where += (f"; {way} all the same: the {level_text(paired.claim_level)} interval [{claim[0]:.3f}, "
                      f"{claim[1]:.3f}] lies {side}")
    return f"; inconclusive: {where}{pairs}; {what_narrows(spread, within)}"


@dataclass(frozen=True)
class PairedRegion:
    """A compared call site's record, with its ``compare`` block and REF's region in it."""

    region: RegionRecord
    block: SiteCompare
    ref: RegionRecord

    @classmethod
    def of(cls, region: RegionRecord) -> PairedRegion | None:
        """None for a call site not compared (or compared without REF's region)."""
        block = region.get("compare")
        ref = block.get("ref") if block else None
        return cls(region, block, ref) if block and block.get("compared") and ref else None


@dataclass(frozen=True)
class ComparedTest:
    """A test's compared call sites, read once from their records (results.json dicts): every number its A/B
    verdict is decided on. :func:`compared_test` reads it; :func:`decide` and :func:`pairs_record` judge it."""

    sites: tuple[PairedRegion, ...]  # the compared regions' records
    paired: PairedRatio  # the time's ratio: the one site's, the sites' combined, or over their process pairs
    top: BetweenPairs | None  # over every site's process pairs; None unless every site has per-pair ratios
    this_time: float  # paired numbers only: the turns of the pairs, never a solo re-measure of this side
    ref_time: float
    this_tmin: float
    ref_tmin: float
    now: Work | None
    reference: Work | None


def compared_test(regions: Sequence[RegionRecord], tolerance: float | None) -> ComparedTest | None:
    """The numbers of a test's compared call sites; None when no call site was compared. ``tolerance``: the
    band's half width the robust interval over process pairs is tried against (:func:`.between_pairs`)."""
    compared = tuple(site for r in regions if (site := PairedRegion.of(r)) is not None)
    if not compared:
        return None
    pairs = [site.block for site in compared]
    sites = [(float(site.ref["time_s"]),
              PairedRatio(float(p["ratio"]), interval_of(p.get("ci")), int(p["pairs"]), interval_of(p.get("claim_ci")),
                          interval_of(p.get("equivalence_ci")), claim_level_of(p.get("claim_level"))))
             for site, p in zip(compared, pairs)]
    per_pair = [(t, p["pair_ratios"]) for (t, _), p in zip(sites, pairs) if p.get("pair_ratios")]
    # the sites' last look (the pool's size); a record without one (or with nonsense) reads as the default pool
    last = min(look if isinstance(look := p.get("last_look"), int) and look >= 3 else LAST_LOOK for p in pairs)
    top = (over_process_pairs(per_pair, tolerance, last) if per_pair and len(per_pair) == len(compared) else None)
    paired = top.as_paired() if top is not None and len(compared) > 1 else combined_ratio(sites)
    return ComparedTest(
        compared, paired, top,
        this_time=sum(float(s.block.get("this_time_s") or s.region["time_s"]) for s in compared),
        ref_time=sum(float(s.block.get("ref_time_s") or s.ref["time_s"]) for s in compared),
        this_tmin=sum(float(s.region["t_min_s"]) for s in compared),
        ref_tmin=sum(float(s.ref["t_min_s"]) for s in compared),
        now=Work.of(sum_maps(s.region.get("flops_by_precision") or {} for s in compared),
                    sum_maps(s.region.get("bytes") or {} for s in compared)),
        reference=Work.of(sum_maps((s.ref.get("flops_by_precision") or {}) for s in compared),
                          sum_maps((s.ref.get("bytes") or {}) for s in compared)))


def decide(test: ComparedTest, tolerances: Tolerances, against: str, bound: str | None) -> TestComparison:
    """The test's A/B record (time, fraction, work and the one verdict) from its numbers."""
    paired = test.paired
    time = Change("time", test.this_time, test.ref_time, paired.ratio, paired.ci, None,
                  time_verdict(paired, tolerances.max_slowdown), paired.claim_ci, paired.equivalence_ci,
                  paired.claim_level)
    # fraction = t_min / time on both sides (the same roofs): its ratio is the t_min ratio over the time ratio
    scale = test.this_tmin / test.ref_tmin if test.ref_tmin > 0 else 1.0

    def fraction_ci(ci: tuple[float, float] | None) -> tuple[float, float] | None:
        return None if ci is None else (scale / ci[1], scale / ci[0])

    def over_scale(ci: tuple[float, float] | None) -> tuple[float, float] | None:
        return None if ci is None else (ci[0] / scale, ci[1] / scale)

    f_ci, f_claim = fraction_ci(paired.ci), fraction_ci(paired.claim_ci)
    f_ratio = scale / paired.ratio
    this_f, ref_f = test.this_tmin / test.this_time, test.ref_tmin / test.ref_time
    # the fraction's drop judged as a slowdown: the time ratio over the t_min ratio, with its intervals
    f_paired = PairedRatio(paired.ratio / scale, over_scale(paired.ci), paired.pairs, over_scale(paired.claim_ci))
    f_verdict = _TIME_VERDICT[verdict(f_paired, 1 / (1 - tolerances.max_drop) - 1)]
    fraction = Change("fraction", this_f, ref_f, f_ratio, f_ci, None, f_verdict, f_claim,
                      claim_level=paired.claim_level)
    work = (None if test.now is None or test.reference is None else
            work_change(test.now, test.reference, bound))
    result = combine(against, time, fraction, work, tolerances.fail_on)
    if result.verdict != "inconclusive" or time.verdict != "inconclusive":
        return result
    ratios: Sequence[float] | None = None  # the pairs' ratios, where one set stands for the whole test
    within: Sequence[PairSummary] | None = None  # and their own intervals, where the test has one site
    if len(test.sites) > 1 and test.top is not None:
        ratios = test.top.ratios
    elif len(test.sites) == 1:
        ratios = test.sites[0].block.get("pair_ratios")
        within = test.sites[0].block.get("within")
    note = inconclusive_note(paired, ratios, tolerances.max_slowdown, within)
    return replace(result, explanation=result.explanation + note)


def compare_regions(regions: Sequence[RegionRecord], tolerances: Tolerances, against: str,
                    bound: str | None) -> TestComparison | None:
    """The test's A/B record from its regions (results.json dicts); None when no call site was compared."""
    test = compared_test(regions, tolerances.max_slowdown)
    return None if test is None else decide(test, tolerances, against, bound)


class PairInterval(TypedDict):
    ratio: float
    ci: list[float] | None
    turns: int


class SitePairs(TypedDict):
    label: str
    pair_ratios: list[float]
    within: list[PairInterval]  # each pair's own ratio and interval


class ProcessPairs(TypedDict, total=False):
    """What varies between the process pairs of a test, for its A/B block (:func:`pairs_record`)."""

    process_pairs: int
    pair_ratios: list[float]
    between_cv: float
    interval: str
    sites: list[SitePairs]


def pairs_record(test: ComparedTest) -> ProcessPairs:
    """What varies between process pairs, for the test's record: per-pair ratios, their CV, and each call
    site's pairs (their own ratios and intervals, for diagnosis)."""
    if not any(s.block.get("pair_ratios") for s in test.sites):
        return {}
    top = test.top
    interval = (f"{top.interval} over process pairs" if top is not None else
                str(test.sites[0].block.get("interval") or "t over process pairs") if len(test.sites) == 1
                else "over process pairs, site by site")
    out: ProcessPairs = ({} if top is None else
                         {"process_pairs": top.pairs, "pair_ratios": list(top.ratios), "between_cv": top.cv})
    out["interval"] = interval
    out["sites"] = [{"label": s.region["label"], "pair_ratios": s.block.get("pair_ratios") or [],
                     "within": [{"ratio": w["ratio"], "ci": w["ci"], "turns": w["turns"]}
                                for w in s.block.get("within") or []]} for s in test.sites]
    return out


def process_record(regions: Sequence[RegionRecord], tolerance: float | None = None) -> ProcessPairs:
    """:func:`pairs_record` of the test these regions make; {} when none was compared."""
    test = compared_test(regions, tolerance)
    return {} if test is None else pairs_record(test)


def compare_band(state: RooflineState, options: MarkerOptions | None) -> float | None:
    """The A/B band's half width the user gave: the marker's ``max_slowdown=`` or
    ``--roofline-compare-max-slowdown``; None: auto (each call site's by its process pairs' spread)."""
    given = options.max_slowdown if options is not None else None
    return given if given is not None else state.settings.compare_max_slowdown


def sites_band(regions: Sequence[RegionRecord]) -> float:
    """The auto band of a test: the widest its compared call sites were judged with (2 % only where every
    site's pairs agreed within 2.5 %); the wide one where no site recorded one. A site that settled on the wide
    band (``compare.settled``) widens the test's only where every site settled: beside a site on the narrow
    band it would blunt that site's claim."""
    judged = [(float(r["compare"]["max_slowdown"]), bool(r["compare"].get("settled"))) for r in regions
              if (r.get("compare") or {}).get("compared") and r["compare"].get("max_slowdown") is not None]
    unsettled = [band for band, was_settled in judged if not was_settled]
    if unsettled:
        return max(unsettled)
    return max(band for band, _ in judged) if judged else AUTO_BANDS[1]


def compare_tolerances(state: RooflineState, options: MarkerOptions | None,
                       regions: Sequence[RegionRecord] = ()) -> Tolerances:
    """The baseline gate's tolerances, but for time the A/B band (:func:`compare_band`; pairs cancel the host's
    drift, so it is tighter than the baseline gate's): the user's number, or the auto band of ``regions``."""
    base = tolerances_of(state, options)
    band = compare_band(state, options)
    return Tolerances(base.max_drop, band if band is not None else sites_band(regions), base.fail_on)


def judge_compare(state: RooflineState, entry: TestEntry, measured: Measured,
                  options: MarkerOptions | None) -> Judgement:
    """The A/B gate (``--roofline-compare``): the test's paired comparison with REF as the record's
    ``compare`` field, and the failure message and charts when it regressed. Writes nothing to ``entry``."""
    regions = measured.regions
    tolerances = compare_tolerances(state, options, regions)
    test = compared_test(regions, tolerances.max_slowdown)
    if test is None:
        return Judgement()
    bound = measured.verdict
    ref = state.compare_ref or {}
    result = decide(test, tolerances, f"{ref.get('ref')} ({str(ref.get('commit'))[:12]})",
                    None if bound is None else bound.bound)
    pairs = sum(int((r.get("compare") or {}).get("pairs") or 0) for r in regions)
    compared = {**entry.extra.get("compare", {}), **result.to_dict(), "ref": ref.get("ref"),
                "commit": ref.get("commit"), "pairs": pairs, "max_drop": tolerances.max_drop,
                "max_slowdown": tolerances.max_slowdown, "auto_band": compare_band(state, options) is None,
                **pairs_record(test)}
    if result.verdict != "regressed":
        return Judgement(compare=compared)
    paths, notes = compare_artifacts(state, entry, measured, result, regions)
    message = failure_message(entry.nodeid, result, ABRecord.from_dict(compared))
    return Judgement(failure="\n".join([message, *(f"  {p}" for p in paths), *(f"  note: {n}" for n in notes)]),
                     compare=compared, artifacts=tuple(str(p) for p in paths))


def compare_artifacts(state: RooflineState, entry: TestEntry, measured: Measured, result: TestComparison,
                      regions: Sequence[RegionRecord]) -> tuple[list[Path], list[str]]:
    """The roofline chart with REF's point joined to this one by an arrow, and the kernel table."""
    refs = [ref for r in regions if (block := r.get("compare")) and (ref := block.get("ref"))]
    ref_flops = sum(sum((r.get("flops_by_precision") or {}).values()) for r in refs)
    ref_bytes = sum_maps(r.get("bytes") or {} for r in refs)
    ref_time = result.time.reference
    reference = (arithmetic_intensity(ref_flops, ref_bytes), ref_flops / ref_time if ref_time > 0 else 0.0,
                 f"REF: fraction {result.fraction.reference:.2f}")
    if measured.judged is None:
        return [], []  # nothing measured: nothing to draw
    return test_artifacts(state.session_dir, entry.nodeid, measured.judged,
                          all_kernels(entry.recorder.regions), measured.verdict,
                          title=f"{entry.nodeid}\n{result.explanation}", min_fraction=entry.min_fraction,
                          reference=reference)
