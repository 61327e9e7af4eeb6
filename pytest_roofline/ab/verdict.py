"""The A/B gate (``--roofline-compare``): a measured test's paired comparison with REF, recorded in
``entry.extra["compare"]``, and its failure message and artifacts. Called from :func:`gates.judge.judge`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_roofline.ab.paired_stats import AUTO_BANDS
from pytest_roofline.ab.report import compare_regions, failure_message, process_record
from pytest_roofline.gates.baseline import tolerances_of
from pytest_roofline.gates.comparison import TestComparison, Tolerances
from pytest_roofline.gates.judgement import Judgement
from pytest_roofline.model import sum_maps
from pytest_roofline.model.roofline import arithmetic_intensity
from pytest_roofline.session.settings import MarkerOptions
from pytest_roofline.session.state import RooflineState, TestEntry

if TYPE_CHECKING:
    from pathlib import Path


def compare_band(state: RooflineState, options: MarkerOptions | None) -> float | None:
    """The A/B band's half width the user gave: the marker's ``max_slowdown=`` or
    ``--roofline-compare-max-slowdown``; None: auto (each call site's by its process pairs' spread)."""
    given = options.max_slowdown if options is not None else None
    return given if given is not None else state.settings.compare_max_slowdown


def sites_band(regions: Sequence[Mapping[str, Any]]) -> float:
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
                       regions: Sequence[Mapping[str, Any]] = ()) -> Tolerances:
    """The baseline gate's tolerances, but for time the A/B band (:func:`compare_band`; pairs cancel the host's
    drift, so it is tighter than the baseline gate's): the user's number, or the auto band of ``regions``."""
    base = tolerances_of(state, options)
    band = compare_band(state, options)
    return Tolerances(base.max_drop, band if band is not None else sites_band(regions), base.fail_on)


def judge_compare(state: RooflineState, entry: TestEntry, options: MarkerOptions | None) -> Judgement:
    """The A/B gate (``--roofline-compare``): the test's paired comparison with REF as the record's
    ``compare`` field, and the failure message and charts when it regressed. Writes nothing to ``entry``."""
    regions = [r.to_dict() for r in entry.recorder.regions]
    tolerances = compare_tolerances(state, options, regions)
    verdict = entry.recorder.verdict()
    ref = state.compare_ref or {}
    result = compare_regions(regions, tolerances, f"{ref.get('ref')} ({str(ref.get('commit'))[:12]})",
                             None if verdict is None else verdict.bound)
    if result is None:
        return Judgement()
    pairs = sum(int((r.get("compare") or {}).get("pairs") or 0) for r in regions)
    compared = {**entry.extra.get("compare", {}), **result.to_dict(), "ref": ref.get("ref"),
                "commit": ref.get("commit"), "pairs": pairs, "max_drop": tolerances.max_drop,
                "max_slowdown": tolerances.max_slowdown, "auto_band": compare_band(state, options) is None,
                **process_record(regions, tolerances.max_slowdown)}
    if result.verdict != "regressed":
        return Judgement(fields={"compare": compared})
    message = failure_message(entry.nodeid, result, compared)
    paths, notes = compare_artifacts(state, entry, result, regions)
    return Judgement(failure="\n".join([message, *(f"  {p}" for p in paths), *(f"  note: {n}" for n in notes)]),
                     fields={"compare": compared}, artifacts=tuple(str(p) for p in paths))


def compare_artifacts(state: RooflineState, entry: TestEntry, result: TestComparison,
                      regions: list[dict[str, Any]]) -> tuple[list[Path], list[str]]:
    """The roofline chart with REF's point joined to this one by an arrow, and the kernel table."""
    from pytest_roofline.output.session_output import all_kernels, test_artifacts

    refs = [r["compare"]["ref"] for r in regions if (r.get("compare") or {}).get("ref")]
    ref_flops = sum(sum((r.get("flops_by_precision") or {}).values()) for r in refs)
    ref_bytes = sum_maps(r.get("bytes") or {} for r in refs)
    ref_time = result.time.reference
    reference = (arithmetic_intensity(ref_flops, ref_bytes), ref_flops / ref_time if ref_time > 0 else 0.0,
                 f"REF: fraction {result.fraction.reference:.2f}")
    return test_artifacts(state.session_dir, entry.nodeid, entry.recorder.judged_machine(),
                          all_kernels(entry.recorder.regions), entry.recorder.verdict(),
                          title=f"{entry.nodeid}\n{result.explanation}", min_fraction=entry.min_fraction,
                          reference=reference)
