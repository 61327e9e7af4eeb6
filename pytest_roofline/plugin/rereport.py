"""Keep pytest's counts equal to results.json's outcomes.

A test whose gate found an error (a fraction no roof allows, nothing counted under a threshold) raises it in
its teardown; its passing call report is then not counted as a pass (:data:`ERROR_PENDING`).

Report a test again when its record changed after pytest reported it: a contended test measured again at the
end of the session (and perhaps failed then). pytest's counts, its failure list and ``--junitxml`` then agree
with ``results.json``.

The process that keeps pytest's terminal and JUnit report (a serial session, the pytest-xdist controller) keeps
each measured test's call report; :meth:`Rereports.rereport` sends a copy with the new outcome and properties
through ``pytest_runtest_logreport``, as a test's own reports go, after taking the test's first call report out
of the terminal's counts and its first test case out of the JUnit report.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from pytest_roofline.output.ci_report import PREFIX, junit_properties
from pytest_roofline.record.tests import TestRecord

REREPORT = "roofline_rereport"  # attribute of a re-sent report (it travels through xdist's serialization too)
ERROR_PENDING = "roofline_error_pending"  # a call report whose test is an error, raised in its teardown


class Rereports:
    """Registered beside the mode plugin of a process that reports to the terminal."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.calls: dict[str, pytest.TestReport] = {}  # a measured test's call report
        self.pending: dict[str, pytest.TestReport] = {}  # a call report until its test's teardown report

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        again = getattr(report, REREPORT, False)
        if again and report.when == "call":
            self._forget_terminal(report.nodeid)
        elif report.when == "call":
            self.pending[report.nodeid] = report
        elif report.when == "teardown":
            call = self.pending.pop(report.nodeid, None)
            # a measured test (its record's properties ride on its teardown report): it may be reported again
            if call is not None and any(str(name).startswith(PREFIX) for name, _ in report.user_properties):
                self.calls[report.nodeid] = call
        result = yield
        if again and report.when == "teardown":
            self._forget_junit()
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
        """A re-sent report is counted under its outcome but prints no second letter on the progress line (its
        failure is listed with the others; the summary says the test was measured again)."""
        if getattr(report, REREPORT, False):  # under -v its word is printed again, which says it was re-reported
            return (report.outcome, "", report.outcome.upper()) if report.when == "call" else ("", "", "")
        if getattr(report, ERROR_PENDING, False) and report.when == "call" and report.passed:
            return ("", "", "")  # its teardown reports the error: one test, one error, not "1 passed, 1 error"
        return None

    def rereport(self, record: TestRecord, failure: str | None) -> bool:
        """Report the test of ``record`` (a ``results.json`` record) again: failed with ``failure``, else passed,
        with JUnit properties from the record. False when its first call report was never seen here."""
        first = self.calls.get(record.nodeid)
        if first is None:
            return False
        properties = [(n, v) for n, v in first.user_properties if not str(n).startswith(PREFIX)]
        properties += junit_properties(record)
        extra = {name: getattr(first, name) for name in ("node", "worker_id", "item_index") if hasattr(first, name)}
        call = pytest.TestReport(first.nodeid, first.location, dict(first.keywords),
                                 "failed" if failure else "passed", failure, "call", user_properties=properties,
                                 **extra)
        teardown = pytest.TestReport(first.nodeid, first.location, dict(first.keywords), "passed", None, "teardown",
                                     user_properties=properties, **extra)
        for report in (call, teardown):
            setattr(report, REREPORT, True)
            self.config.hook.pytest_runtest_logreport(report=report)
        return True

    def _forget_terminal(self, nodeid: str) -> None:
        """Take the test's earlier call report out of the terminal's counts (the last line, the summaries)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        for reports in getattr(reporter, "stats", {}).values():
            reports[:] = [r for r in reports if not (getattr(r, "nodeid", None) == nodeid
                                                     and getattr(r, "when", None) == "call"
                                                     and not getattr(r, REREPORT, False))]

    def _forget_junit(self) -> None:
        """Take the earlier test case of the test just re-reported out of ``--junitxml`` (its last one stays)."""
        try:
            from _pytest.junitxml import xml_key
        except ImportError:  # pytest moved it: the JUnit report then lists the test twice
            return
        xml = self.config.stash.get(xml_key, None)
        if xml is None or not xml.node_reporters_ordered:
            return
        try:
            cases = [(r, r.to_xml()) for r in xml.node_reporters_ordered]
            last = cases[-1][1]
            name = (last.get("classname"), last.get("name"))
            earlier = [(r, e) for r, e in cases[:-1] if (e.get("classname"), e.get("name")) == name]
            for reporter, element in earlier:
                xml.node_reporters_ordered.remove(reporter)
                kinds = {child.tag for child in element}
                key = next((k for k in ("failure", "error", "skipped") if k in kinds), "passed")
                xml.stats[key] = max(0, xml.stats.get(key, 0) - 1)
        except Exception:  # noqa: BLE001 - pytest's JUnit internals changed: the test is then listed twice
            return
