"""CI reporting: JUnit XML properties per roofline test, and the GitHub Actions step summary.

Work is declared and the callable sleeps (see tests/test_plugin.py): on the pinned machine of 100 GFLOP/s
fp32, 1e9 declared FLOPs is a 10 ms lower bound, so a 10 ms sleep reads about 1 and a 20 ms one about 0.5.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot  # noqa: F401 - see tests/test_plugin.py: imported once, before in-process runs
import numpy  # noqa: F401
import pytest

from pytest_roofline.model import Machine
from pytest_roofline.output import ci_report
from pytest_roofline.output.ci_report import junit_properties
from pytest_roofline.record.baseline_record import BaselineRecord
from pytest_roofline.record.tests import TestRecord

SUITE = """
import time, pytest

def sleep_20ms():
    time.sleep(0.020)

@pytest.mark.roofline(min_fraction=0.05)
def test_gated(roofline):
    roofline.declare(flops=1e9).measure(sleep_20ms)

@pytest.mark.roofline
def test_ungated(roofline):
    roofline.declare(flops=1e9, bytes=1e6).measure(sleep_20ms)

@pytest.mark.roofline(min_fraction=0.99)
def test_below(roofline):
    roofline.declare(flops=1e9).measure(sleep_20ms)

def test_plain():
    pass
"""



def properties(xml_path: Path) -> dict[str, dict[str, str]]:
    """``{test name: {property: value}}`` from a JUnit XML file."""
    found: dict[str, dict[str, str]] = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        found[case.get("name", "")] = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
    return found


# -- JUnit properties ----------------------------------------------------------------------------------------

def test_junit_properties_from_a_record() -> None:
    record = TestRecord("t", fraction=0.123456789, min_fraction=0.1, bound="memory:DRAM",
                        baseline=BaselineRecord.from_dict({"fraction": 0.14, "drop": 0.1181, "verdict": "regressed",
                                                           "sessions": ["a"]}))
    assert junit_properties(record) == [
        ("roofline_fraction", "0.123457"), ("roofline_min_fraction", "0.1"), ("roofline_bound", "memory:DRAM"),
        ("roofline_baseline_fraction", "0.14"), ("roofline_drop", "0.1181"), ("roofline_verdict", "regressed")]
    # a new test has a verdict but no baseline figures; a test that measured nothing has no properties
    assert junit_properties(TestRecord("t", fraction=0.5, min_fraction=None, bound="compute:fp32",
                                       baseline=BaselineRecord.from_dict({"fraction": None, "drop": None,
                                                                          "verdict": "new"}))) == [
        ("roofline_fraction", "0.5"), ("roofline_bound", "compute:fp32"), ("roofline_verdict", "new")]
    assert junit_properties(TestRecord("t", fraction=None, min_fraction=0.5, bound=None)) == [
        ("roofline_min_fraction", "0.5")]


def test_junit_xml_carries_each_roofline_test_figures(pytester: pytest.Pytester, machine_file: Path,
                                                      run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(SUITE)
    result = run_roofline(machine_file, "--junitxml", "junit.xml", "--roofline-confirm", "off")
    result.assert_outcomes(passed=3, failed=1)
    found = properties(pytester.path / "junit.xml")
    # 1e9 FLOPs at 100 GFLOP/s = 10 ms; a 20 ms sleep (plus its overhead) reads 0.5 or a little less
    for name in ("test_gated", "test_ungated", "test_below"):
        assert 0.3 < float(found[name]["roofline_fraction"]) <= 0.5, found[name]
        assert found[name]["roofline_bound"] == "compute:fp32"
    assert found["test_gated"]["roofline_min_fraction"] == "0.05"
    assert found["test_below"]["roofline_min_fraction"] == "0.99"
    assert "roofline_min_fraction" not in found["test_ungated"]
    assert found["test_plain"] == {}
    assert not any(name.startswith("roofline_baseline") for props in found.values() for name in props)


def test_no_properties_without_roofline(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=4)
    assert all(props == {} for props in properties(pytester.path / "junit.xml").values())


# -- the step summary ----------------------------------------------------------------------------------------

def _test(nodeid: str, outcome: str, fraction: float | None, min_fraction: float | None = None,
          baseline: dict | None = None, artifacts: tuple[str, ...] = ()) -> TestRecord:
    record = {"nodeid": nodeid, "outcome": outcome, "fraction": fraction, "min_fraction": min_fraction,
              "bound": "memory:DRAM" if fraction is not None else None, "artifacts": list(artifacts)}
    if baseline is not None:
        record["baseline"] = baseline
    return TestRecord.from_dict(record)


def test_summary_order_regressions_first_then_worst() -> None:
    tests = [
        _test("t.py::fine", "passed", 0.8, 0.5),  # 1.6 x its threshold
        _test("t.py::close", "passed", 0.55, 0.5),  # 1.1 x
        _test("t.py::ungated_low", "passed", 0.2),  # no threshold: by its fraction
        _test("t.py::failed", "failed", 0.1, 0.5, artifacts=(".roofline/s/t-1.png",)),
        _test("t.py::unmeasured", "skipped", None),
        _test("t.py::regressed_small", "failed", 0.7, 0.5, {"fraction": 0.8, "drop": 0.125, "verdict": "regressed"}),
        _test("t.py::regressed_big", "failed", 0.5, 0.2, {"fraction": 0.8, "drop": 0.375, "verdict": "regressed"}),
        _test("t.py::improved", "passed", 0.9, 0.5, {"fraction": 0.6, "drop": -0.5, "verdict": "improved"}),
    ]
    order = [t.nodeid.split("::")[1] for t in sorted(tests, key=ci_report.sort_key)]
    assert order == ["regressed_big", "regressed_small", "failed",  # bad first: biggest drop, then the rest
                     "improved",  # has a drop figure (negative): before those without one
                     "ungated_low", "close", "fine", "unmeasured"]


def test_summary_markdown_table() -> None:
    tests = [_test("t.py::ok", "passed", 0.8, 0.5),
             _test("t.py::reg[a|b]", "failed", 0.6, 0.5, {"fraction": 0.8, "drop": 0.25, "verdict": "regressed"},
                   artifacts=(".roofline/sessions/x/t.png", ".roofline/sessions/x/t.kernels.csv"))]
    machine = {"name": "Xeon 2c", "peak_flops": {"fp32": 1e11}, "bandwidth": {},
               "info": {"device": "cpu", "fingerprint_hash": "abc123"}}
    text = ci_report.summary_markdown(tests, Machine.from_dict(machine), ".roofline/results.json",
                                      ".roofline/sessions/x", 1)
    lines = text.splitlines()
    assert lines[0] == "### pytest-roofline"
    assert "**2 roofline tests, 1 failed, 1 regressed, 0 improved** · exit status 1" in lines
    assert "machine: **Xeon 2c** (device cpu, fingerprint `abc123`)" in lines
    rows = [line for line in lines if line.startswith("| ") and "`t.py::" in line]
    assert rows == [
        ("| ❌ | `t.py::reg[a\\|b]` | failed | 0.600 | 0.5 | memory:DRAM | 0.800 | +25.0% | regressed | "
         "`.roofline/sessions/x/t.png`<br>`.roofline/sessions/x/t.kernels.csv` |"),
        "| ✅ | `t.py::ok` | passed | 0.800 | 0.5 | memory:DRAM |  |  |  |  |",
    ]
    assert lines[-1] == ("results: `.roofline/results.json`; this session's charts and kernel tables: "
                         "`.roofline/sessions/x/`")


def test_append_never_raises(tmp_path: Path) -> None:
    tests = [_test("t.py::ok", "passed", 0.8, 0.5)]
    assert ci_report.append_step_summary(tests, None, "r.json", environ={}) is None  # not on GitHub: nothing
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n")
    assert ci_report.append_step_summary(tests, None, "r.json", environ={"GITHUB_STEP_SUMMARY": str(target)}) is None
    assert target.read_text().startswith("earlier step\n### pytest-roofline\n")  # appended, not replaced
    problem = ci_report.append_step_summary(tests, None, "r.json", environ={"GITHUB_STEP_SUMMARY": str(tmp_path)})
    assert problem is not None and "could not write the step summary" in problem


def test_step_summary_written_at_session_end(pytester: pytest.Pytester, machine_file: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             run_roofline: Callable[..., pytest.RunResult]) -> None:
    target = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    pytester.makepyfile(SUITE)
    result = run_roofline(machine_file, "--roofline-confirm", "off")
    result.assert_outcomes(passed=3, failed=1)
    text = target.read_text()
    assert text.count("### pytest-roofline") == 1
    assert "**3 roofline tests, 1 failed** · exit status 1" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "test_" in line]
    assert [row.split("`")[1] for row in rows] == [
        "test_step_summary_written_at_session_end.py::test_below",  # failed: on top
        "test_step_summary_written_at_session_end.py::test_ungated",  # no threshold: its fraction, ~0.5
        "test_step_summary_written_at_session_end.py::test_gated",  # ~0.5 / 0.05: 10 x its threshold
    ]
    assert ".png`" in rows[0] and "machine: **pinned-test-machine** (pinned ceilings)" in text


def test_step_summary_failure_is_a_line_not_an_error(pytester: pytest.Pytester, machine_file: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     run_roofline: Callable[..., pytest.RunResult]) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path))  # a directory: cannot be appended to
    pytester.makepyfile(SUITE)
    result = run_roofline(machine_file, "-k", "gated and not ungated")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["roofline: could not write the step summary to $GITHUB_STEP_SUMMARY*"])
    assert (pytester.path / ".roofline" / "results.json").is_file()


# The baseline gate (issue 10 part 2, another branch) puts its comparison in entry.extra["baseline"] during the
# call phase; this conftest does the same, so the path from that record to JUnit and the summary is tested.
BASELINE_CONFTEST = """
import pytest
from pytest_roofline.plugin.modes import ENTRY

BASELINES = {
    "test_gated": {"fraction": 0.6, "drop": 0.2, "verdict": "regressed", "sessions": ["s1", "s2"],
                   "ci": [0.1, 0.3], "statistic": "fake"},
    "test_ungated": {"fraction": 0.4, "drop": -0.25, "verdict": "improved", "sessions": ["s1"],
                     "ci": [-0.3, -0.2], "statistic": "fake"},
    "test_below": {"fraction": None, "drop": None, "verdict": "new", "sessions": [], "ci": None,
                   "statistic": "fake"},
}

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    try:
        return (yield)
    finally:
        entry = item.stash.get(ENTRY, None)
        if entry is not None and item.name in BASELINES:
            entry.extra["baseline"] = BASELINES[item.name]
"""


def test_baseline_figures_reach_junit_and_the_summary(pytester: pytest.Pytester, machine_file: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      run_roofline: Callable[..., pytest.RunResult]) -> None:
    target = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    pytester.makeconftest(BASELINE_CONFTEST)
    pytester.makepyfile(SUITE)
    result = run_roofline(machine_file, "--junitxml", "junit.xml", "--roofline-confirm", "off")
    result.assert_outcomes(passed=3, failed=1)
    found = properties(pytester.path / "junit.xml")
    assert {k: v for k, v in found["test_gated"].items() if "baseline" in k or k in ("roofline_drop",
                                                                                     "roofline_verdict")} == {
        "roofline_baseline_fraction": "0.6", "roofline_drop": "0.2", "roofline_verdict": "regressed"}
    assert found["test_ungated"]["roofline_drop"] == "-0.25"
    assert found["test_below"]["roofline_verdict"] == "new" and "roofline_drop" not in found["test_below"]
    text = target.read_text()
    assert "**3 roofline tests, 1 failed, 1 regressed, 1 improved**" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "test_" in line]
    assert [row.split("`")[1].split("::")[1] for row in rows] == ["test_gated", "test_below", "test_ungated"]
    assert rows[0].startswith("| ❌ |") and "| 0.600 | +20.0% | regressed |" in rows[0]
    assert rows[2].startswith("| ⬆️ |") and "| -25.0% | improved |" in rows[2]
