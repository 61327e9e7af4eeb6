"""The baseline gate (``--roofline-baseline``): compare a test's time per call, counted work and fraction with
its own baseline sessions, and fail it when a quantity it is failed on (``--roofline-fail-on``, default time
and fraction) got significantly worse by more than its tolerance. Plain Python; called from
:func:`gates.judge.judge`.

Every test compared gets ``entry.extra["baseline"]`` (into results.json and the history): the shared
:class:`~pytest_roofline.gates.comparison.TestComparison` record plus the fields older readers know
(``fraction``, ``drop``, ``ci`` of the fraction, ``sessions``, ``commits``, ``statistic``); see docs/history.md
and docs/comparison.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pytest_roofline.gates.baseline_stats import (
    Measurement,
    Spread,
    describe_interval,
    describe_method,
    needed_text,
    pooled_over,
    seed_for,
)
from pytest_roofline.gates.comparison import TestComparison, Tolerances, compare_test
from pytest_roofline.history.baseline import session_label
from pytest_roofline.measure.work import Work
from pytest_roofline.model.units import time_text
from pytest_roofline.output.session_output import all_kernels, test_artifacts
from pytest_roofline.record.tests import Measured, gpu_l2_of, threads_of
from pytest_roofline.session.settings import MarkerOptions
from pytest_roofline.session.state import RooflineState, TestEntry

if TYPE_CHECKING:
    from pathlib import Path

    from pytest_roofline.gates.judgement import Judgement
    from pytest_roofline.history.baseline import Baseline


def tolerances_of(state: RooflineState, options: MarkerOptions | None) -> Tolerances:
    """The marker's arguments where given, else the session's options."""
    s = state.settings
    o = options or MarkerOptions()
    return Tolerances(o.max_drop if o.max_drop is not None else s.max_drop,
                      o.max_slowdown if o.max_slowdown is not None else s.max_slowdown,
                      o.fail_on if o.fail_on is not None else s.fail_on)


def tolerances_from_record(record: dict[str, Any]) -> Tolerances:
    return Tolerances(float(record["max_drop"]), float(record["max_slowdown"]), tuple(record["fail_on"]))


def current_measurement(measured: Measured) -> Measurement | None:
    verdict = measured.verdict
    if verdict is None:
        return None
    return Measurement.of(verdict.fraction, verdict.time_s, measured.regions, Work.of(verdict.flops, verdict.bytes))


def baseline_of(state: RooflineState) -> Baseline:
    """The session's baseline; the baseline gate runs only in a session that loaded one."""
    if state.baseline is None:
        raise ValueError("the baseline gate needs a baseline: --roofline-baseline was not loaded")
    return state.baseline


def pooled(state: RooflineState, quantity: str) -> Spread | None:
    """The session-to-session spread of ``quantity`` pooled over this machine's tests (baseline and history
    sessions): each test's values over its last N sessions. Computed once per session."""
    baseline = baseline_of(state)
    if quantity not in baseline.pooled:
        by_test = baseline.pool_by_test()
        baseline.pooled[quantity] = pooled_over(([s.tests[n] for s in chosen] for n, chosen in by_test.items()),
                                                quantity)
    found = baseline.pooled[quantity]
    return found if isinstance(found, Spread) else None


def compare_entry(state: RooflineState, entry: TestEntry, measured: Measured,
                  tolerances: Tolerances) -> tuple[TestComparison | None, dict[str, Any] | None]:
    """Compare the test (``measured``: what its call sites measured) with its baseline sessions: the comparison
    (None when there is nothing to compare: no measurement, or a new test) and the record's ``baseline`` block
    (None without a measurement)."""
    current = current_measurement(measured)
    if current is None or measured.verdict is None:
        return None, None
    regions = measured.regions
    record_base = {"max_drop": tolerances.max_drop, "max_slowdown": tolerances.max_slowdown,
                   "fail_on": list(tolerances.fail_on)}
    chosen = baseline_of(state).sessions_for(entry.nodeid, entry.extra.get("params"), threads_of(regions),
                                             gpu_l2_of(regions))
    found = [(s, m) for s, m in ((s, Measurement.from_record(s.tests[entry.nodeid])) for s in chosen)
             if m is not None]
    if not found:
        return None, {"fraction": None, "drop": None, "verdict": "new", "sessions": [], "ci": None,
                      "statistic": "no baseline session measured this test", **record_base}
    result = compare_test(current, [m for _, m in found], tolerances, bound=measured.verdict.bound,
                          pooled={q: pooled(state, q) for q in ("time", "fraction")}, seed=seed_for(entry.nodeid))
    time, fraction = result.time, result.fraction
    statistic = (f"{describe_interval(time)}; {describe_interval(fraction)} ({describe_method(time)})"
                 if time.ci is not None else f"inconclusive: {needed_text(len(found))}")
    block = {**result.to_dict(), **record_base,
             "fraction": fraction.reference, "drop": 1.0 - fraction.ratio,
             "ci": None if fraction.ci is None else list(fraction.ci), "statistic": statistic,
             "sessions": [s.id for s, _ in found], "commits": [s.commit for s, _ in found]}
    return result, block


def judge_baseline(state: RooflineState, entry: TestEntry, measured: Measured, options: MarkerOptions | None,
                   xfail: bool, outcome: Judgement) -> Judgement:
    """``outcome`` (the threshold gate's, passed) with the baseline gate's record and, for a significant
    regression against the baseline, its failure.

    Before it fails, a test is measured once more at once (``--roofline-confirm on``, as for the threshold) and
    the faster measurement is kept; it fails only when that one regressed too. A contended measurement (no
    free core) is not failed unless ``--roofline-strict``.
    """
    if state.baseline is None:
        return outcome
    tolerances = tolerances_of(state, options)
    result, block = compare_entry(state, entry, measured, tolerances)
    if block is not None:
        outcome = replace(outcome, baseline=block)
    if result is None or block is None or result.verdict != "regressed":
        return outcome
    if not state.settings.strict and not xfail and entry.recorder.is_contended():
        # measured again at the end of the session
        return replace(outcome, baseline={**block, "excused": "contended"}, not_gated="contended")
    if state.settings.confirm == "on" and not xfail and outcome.confirmed is None:
        first = result.fraction.now
        if entry.recorder.confirm() and result.failed_on != ("work",):
            measured = entry.recorder.measured()
            again, again_block = compare_entry(state, entry, measured, tolerances)
            if again is not None and again_block is not None:
                result, block = again, again_block
            outcome = replace(outcome, baseline=block, confirmed=(first, result.fraction.now))
            if result.verdict != "regressed":
                return outcome
    message, paths = regression_report(state, entry, measured, result, block, outcome.confirmed)
    return outcome.adding(artifacts=paths, failure=message)


def regression_report(state: RooflineState, entry: TestEntry, measured: Measured, result: TestComparison,
                      record: Mapping[str, Any], confirmed: tuple[float, float] | None = None) -> tuple[str, list[str]]:
    """One message: what got worse and why (the explanation), the figures now and in the baseline
    (``record``: the record's ``baseline`` block), the sessions, the statistic, the tolerances, and the chart's
    path; and the paths of the artifacts written."""
    by_id = {s.id: s for s in baseline_of(state).sessions}
    sessions = ", ".join(session_label(by_id[i]) for i in record["sessions"] if i in by_id)
    count = len(record["sessions"])
    t, f = result.time, result.fraction
    why = {"time": f"time per call rose more than max_slowdown {record['max_slowdown']:.0%}",
           "fraction": f"fraction fell more than max_drop {record['max_drop']:.0%}",
           "work": "the counted work changed (fail_on includes work)"}
    lines = [f"roofline: regression against the baseline: {result.explanation}",
             (f"  time {time_text(t.now)} now, {time_text(t.reference)} in the baseline; fraction {f.now:.3g} now, "
              f"{f.reference:.3g} in the baseline ({'median of ' if count > 1 else ''}{count} "
              f"session{'s' if count > 1 else ''}: {sessions})"),
             f"  fails on: {'; '.join(why[q] for q in result.failed_on)}"]
    if result.work is not None and result.work.verdict != "same":
        now, ref = result.work.now, result.work.reference
        levels = sorted(set(now.bytes) | set(ref.bytes))
        moved = "; bytes " + ", ".join(f"{k} {now.bytes.get(k, 0):.4g} vs {ref.bytes.get(k, 0):.4g}"
                                       for k in levels) if levels else ""
        lines.append(f"  work: {now.total_flops:.4g} FLOPs now, {ref.total_flops:.4g} in the baseline{moved}")
    lines.append(f"  statistic: {record['statistic']}")
    if confirmed is not None:
        lines.append(f"  measured again at once: fraction {confirmed[0]:.3g} then {confirmed[1]:.3g}; "
                     "the faster is kept")
    paths, notes = regression_artifacts(state, entry, measured, result)
    lines += [f"  {p}" for p in paths] + [f"  note: {n}" for n in notes]
    return "\n".join(lines), [str(p) for p in paths]


def regression_artifacts(state: RooflineState, entry: TestEntry, measured: Measured,
                         result: TestComparison) -> tuple[list[Path], list[str]]:
    """The roofline chart with the baseline's point beside the current one, and the kernel table."""
    if measured.judged is None:
        return [], []  # nothing measured: nothing to draw
    # the roofs of the cores it ran on, as its fraction
    return test_artifacts(state.session_dir, entry.nodeid, measured.judged,
                          all_kernels(entry.recorder.regions), measured.verdict,
                          title=f"{entry.nodeid}: regression against the baseline", min_fraction=entry.min_fraction,
                          baseline_fraction=result.fraction.reference)
