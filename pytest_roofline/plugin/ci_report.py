"""CI reporting glue: each roofline test's figures as JUnit XML properties, and the session's table in the
GitHub Actions step summary (``$GITHUB_STEP_SUMMARY``). The contents come from plain modules
(:mod:`pytest_roofline.output.ci_report`, :mod:`pytest_roofline.output.step_summary`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from pytest_roofline.output.record import TestRecord
from pytest_roofline.output.results_dir import RESULTS_FILE
from pytest_roofline.session.state import RooflineState, TestEntry


def add_junit_properties(item: pytest.Item, entry: TestEntry) -> None:
    """Put the test's fraction, threshold, bound and baseline comparison (from its results.json record, as
    every output renders it) in ``item.user_properties``, which
    pytest copies into the test's report (and so into ``--junitxml`` and, under xdist, to the controller).
    Called before the call phase's report is made; a test that measured nothing gets none."""
    from pytest_roofline.output.ci_report import PREFIX, junit_properties
    from pytest_roofline.output.session_output import test_result

    recorder = entry.recorder
    try:
        record = test_result(entry) if recorder is not None and recorder.regions else None
    except Exception:  # noqa: BLE001 - a verdict that cannot be made failed the test already; no figures then
        return
    if record is None:
        return
    kept: list[tuple[str, object]] = [(name, value) for name, value in item.user_properties
                                      if not str(name).startswith(PREFIX)]
    item.user_properties[:] = [*kept, *junit_properties(record)]  # a confirmation re-run replaces, never repeats


def write_step_summary(state: RooflineState, tests: Sequence[TestRecord], machine: Mapping[str, object] | None,
                       exit_status: int) -> None:
    """Append the session's table to ``$GITHUB_STEP_SUMMARY`` when it is set; a failure is said in the terminal
    summary, never raised. Called once per session by the process that writes ``results.json`` (a serial
    session or the xdist controller; workers inherit the variable but never call it)."""
    from pytest_roofline.output.step_summary import append_step_summary

    directory = state.settings.directory
    problem = append_step_summary(tests, machine, str(directory / RESULTS_FILE), str(state.session_dir),
                                  exit_status)
    if problem:
        state.write_error = f"{state.write_error}\n{problem}" if state.write_error else problem
