"""CI reporting glue: each roofline test's record, built once, with its figures as JUnit XML properties, and
the session's table in the GitHub Actions step summary (``$GITHUB_STEP_SUMMARY``). The contents come from
:mod:`pytest_roofline.output.ci_report`."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pytest_roofline.history.results_dir import RESULTS_FILE
from pytest_roofline.model import Machine
from pytest_roofline.record.tests import Measured, TestRecord
from pytest_roofline.session.state import RooflineState, TestEntry


def record_of(entry: TestEntry) -> TestRecord:
    """The test's record, from what its call sites measured (read now, once) and what its gates, counter and
    runner put on its entry: where every live test's record is built."""
    measured = entry.recorder.measured() if entry.recorder is not None else Measured()
    return TestRecord.of(measured, nodeid=entry.nodeid, outcome=entry.outcome, min_fraction=entry.min_fraction,
                         artifacts=entry.artifacts, nothing_counted=entry.nothing_counted, fields=entry.extra)


def finish_record(item: pytest.Item, report: pytest.TestReport, entry: TestEntry) -> None:
    """Build the test's record, once, when its teardown report is made (its outcome is known then), and put its
    fraction, threshold, bound and gate verdicts (:func:`.output.ci_report.junit_properties`) in the report's and
    the item's ``user_properties``: pytest's ``--junitxml`` writes the teardown report's properties, and xdist
    carries them to the controller with it. A test that measured nothing gets no properties."""
    from pytest_roofline.output.ci_report import PREFIX, junit_properties

    try:
        entry.record = record_of(entry)
    except Exception:  # noqa: BLE001 - a verdict that cannot be made failed the test already; built at the end
        return
    if entry.recorder is None or not entry.recorder.regions:
        return
    properties = junit_properties(entry.record)
    for holder in (item.user_properties, report.user_properties):
        kept = [(name, value) for name, value in holder if not str(name).startswith(PREFIX)]
        holder[:] = [*kept, *properties]  # a confirmation re-run replaces, never repeats


def write_step_summary(state: RooflineState, tests: Sequence[TestRecord], machine: Machine | None,
                       exit_status: int) -> None:
    """Append the session's table to ``$GITHUB_STEP_SUMMARY`` when it is set; a failure is said in the terminal
    summary, never raised. Called once per session by the process that writes ``results.json`` (a serial
    session or the xdist controller; workers inherit the variable but never call it)."""
    from pytest_roofline.output.ci_report import append_step_summary

    directory = state.settings.directory
    problem = append_step_summary(tests, machine, str(directory / RESULTS_FILE), str(state.session_dir),
                                  exit_status)
    if problem:
        state.write_error = f"{state.write_error}\n{problem}" if state.write_error else problem
