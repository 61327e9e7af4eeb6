"""The baseline gate (``--roofline-baseline``): fail a test whose fraction fell, significantly, by more than
``max_drop`` since its baseline sessions. Plain Python; called from :func:`measure.gate.judge`.

Every test compared gets ``entry.extra["baseline"]`` (into results.json and the history):
``{"fraction", "drop", "verdict", "sessions", "ci", "statistic"}``; see README, "Baseline gate".
"""

from __future__ import annotations

from typing import Any

from pytest_roofline.measure.baseline_stats import Comparison, Measurement, compare, seed_for
from pytest_roofline.measure.settings import MarkerOptions
from pytest_roofline.measure.state import RooflineState, TestEntry


def max_drop_for(state: RooflineState, options: MarkerOptions | None) -> float:
    """The marker's ``max_drop=`` if given, else ``--roofline-max-drop``."""
    return options.max_drop if options is not None and options.max_drop is not None else state.settings.max_drop


def current_measurement(entry: TestEntry) -> Measurement | None:
    verdict = entry.recorder.verdict()
    if verdict is None:
        return None
    return Measurement.from_record({"fraction": verdict.fraction,
                                    "regions": [r.to_dict() for r in entry.recorder.regions]})


def compare_entry(state: RooflineState, entry: TestEntry, max_drop: float) -> Comparison | None:
    """Compare the test with its baseline sessions and record the result in ``entry.extra["baseline"]``;
    None when there is nothing to compare (no measurement, or a new test)."""
    baseline = state.baseline
    measured = [(session, Measurement.from_record(session.tests[entry.nodeid])) for session in baseline.sessions
                if entry.nodeid in session.tests]
    found = [(session, m) for session, m in measured if m is not None]
    current = current_measurement(entry)
    if current is None:
        return None
    if not found:
        entry.extra["baseline"] = {"fraction": None, "drop": None, "verdict": "new", "sessions": [], "ci": None,
                                   "statistic": "no baseline session measured this test", "max_drop": max_drop}
        return None
    result = compare(current, [m for _, m in found], max_drop, seed=seed_for(entry.nodeid))
    entry.extra["baseline"] = {"fraction": result.baseline_fraction, "drop": result.drop, "verdict": result.verdict,
                               "sessions": [s.id for s, _ in found], "ci": list(result.ci),
                               "statistic": result.statistic, "max_drop": max_drop,
                               "commits": [s.commit for s, _ in found]}
    return result


def judge_baseline(state: RooflineState, entry: TestEntry, options: MarkerOptions | None,
                   xfail: bool) -> str | None:
    """The failure message of a significant regression against the baseline, else None.

    Before it fails, a test is measured once more at once (``--roofline-confirm on``, as for the threshold) and
    the faster measurement is kept; it fails only when that one regressed too. A contended measurement (no
    free core) is not failed unless ``--roofline-strict``.
    """
    if state.baseline is None:
        return None
    max_drop = max_drop_for(state, options)
    result = compare_entry(state, entry, max_drop)
    if result is None or result.verdict != "regressed":
        return None
    if not state.settings.strict and not xfail and entry.recorder.is_contended():
        entry.extra["baseline"]["excused"] = "contended"  # measured again at the end of the session
        return None
    if state.settings.confirm == "on" and not xfail and "confirmed" not in entry.extra:
        first = result.fraction
        if entry.recorder.confirm():
            result = compare_entry(state, entry, max_drop) or result
            entry.extra["confirmed"] = {"first": first, "second": result.fraction}
            if result.verdict != "regressed":
                return None
    return regression_report(state, entry, result, max_drop)


def regression_report(state: RooflineState, entry: TestEntry, result: Comparison, max_drop: float) -> str:
    """One message: the baseline's fraction and sessions, now, the drop, the statistic, the chart's path."""
    from pytest_roofline.history.baseline import session_label

    record = entry.extra["baseline"]
    by_id = {s.id: s for s in state.baseline.sessions}
    sessions = ", ".join(session_label(by_id[i]) for i in record["sessions"] if i in by_id)
    count = len(record["sessions"])
    lines = [(f"roofline: regression against the baseline: fraction {result.fraction:.3g} now, "
              f"{result.baseline_fraction:.3g} in the baseline ({'median of ' if count > 1 else ''}{count} "
              f"session{'s' if count > 1 else ''}: {sessions}): a drop of {result.drop:.1%}, more than max_drop "
              f"{max_drop:.0%}, and significant: {result.statistic}")]
    if "confirmed" in entry.extra:
        confirmed = entry.extra["confirmed"]
        lines.append(f"  measured again at once: fraction {confirmed['first']:.3g} then {confirmed['second']:.3g}; "
                     "the faster is kept")
    paths, notes = regression_artifacts(state, entry, result)
    entry.artifacts.extend(str(p) for p in paths)
    lines += [f"  {p}" for p in paths] + [f"  note: {n}" for n in notes]
    return "\n".join(lines)


def regression_artifacts(state: RooflineState, entry: TestEntry, result: Comparison) -> tuple[list[Any], list[str]]:
    """The roofline chart with the baseline's point beside the current one, and the kernel table."""
    from pytest_roofline.output.artifacts import artifact_path, write_kernels_csv
    from pytest_roofline.output.chart import draw_roofline
    from pytest_roofline.output.session_output import all_kernels

    machine = entry.recorder.judged_machine()  # the roofs of the cores it ran on, as its fraction
    kernels = all_kernels(entry.recorder.regions)
    verdict = entry.recorder.verdict()
    directory = state.session_dir
    writers = (
        lambda: draw_roofline(artifact_path(directory, entry.nodeid, ".png"), machine, kernels, verdict,
                              title=f"{entry.nodeid}: regression against the baseline",
                              min_fraction=entry.min_fraction, baseline_fraction=result.baseline_fraction),
        lambda: write_kernels_csv(artifact_path(directory, entry.nodeid, ".kernels.csv"), kernels, machine),
    )
    paths, notes = [], []
    for write in writers:
        try:
            paths.append(write())
        except Exception as exc:  # noqa: BLE001 - a broken chart must not hide the regression
            notes.append(f"could not write an artifact: {exc!r}")
    return paths, notes
