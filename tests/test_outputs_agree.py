"""Every output of one session renders its results.json: the terminal rows, the JUnit properties, the GitHub
step summary and pytest's own counts, in a serial session and under ``pytest -n 2`` alike; and the two give
the same rows and verdicts. Real runs in subprocesses (xdist needs them), declared work on a pinned machine.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

MACHINE = {"name": "pinned-test-machine", "peak_flops": {"fp32": 100e9}, "bandwidth": {"DRAM": 10e9}}

# 1e8 FLOPs at 100 GFLOP/s = 1 ms; a 2 ms sleep reads about 0.5.
SUITE = """
import time, pytest

def sleep_2ms():
    time.sleep(0.002)

@pytest.mark.roofline(min_fraction=0.05)
@pytest.mark.parametrize("case", range(3))
def test_fast(roofline, case):
    roofline.declare(flops=1e8).measure(sleep_2ms)

@pytest.mark.roofline(min_fraction=0.99)
def test_below(roofline):
    roofline.declare(flops=1e8).measure(sleep_2ms)

@pytest.mark.roofline
def test_no_gate(roofline):
    roofline.declare(flops=1e8, bytes=1e6).measure(sleep_2ms)

@pytest.mark.roofline(min_fraction=0.1)
def test_nothing_counted(roofline):
    roofline.declare(flops=0).measure(sleep_2ms)
"""

HEADER = re.compile(r"^test\s+fraction\s+min\s+bound\s+time/call\s+GFLOP/s\s+GB/s\s+verdict$")


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, name: str, *args: str) -> dict[str, Any]:
    summary = pytester.path / f"{name}.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("COLUMNS", "120")
    result = pytester.runpytest_subprocess(
        *args, "-q", "--roofline", "--roofline-machine", str(pytester.path / "machine.json"),
        "--roofline-max-time", "0.05", "--roofline-confirm", "off", "--roofline-dir", name,
        "-p", "no:cacheprovider", "--junitxml", f"{name}.xml")
    document = json.loads((pytester.path / name / "results.json").read_text())
    return {"result": result, "tests": {t["nodeid"]: t for t in document["tests"]}, "summary": summary.read_text(),
            "junit": ET.parse(pytester.path / f"{name}.xml").getroot()}


def rows(lines: list[str]) -> dict[str, list[str]]:
    """The summary table's rows by node id (shortened ids keep their end), cells split on 2+ spaces."""
    start = next(i for i, line in enumerate(lines) if HEADER.match(line))
    table: dict[str, list[str]] = {}
    for line in lines[start + 1:]:
        if line.startswith("    "):  # a row's markers on a line of their own
            continue
        cells = re.split(r"\s{2,}", line)
        if len(cells) < 8:
            break
        table[cells[0]] = cells
    return table


def cell_for(table: dict[str, list[str]], nodeid: str) -> list[str]:
    (cells,) = [c for shown, c in table.items() if shown == nodeid or (shown.startswith("...")
                                                                         and nodeid.endswith(shown[3:]))]
    return cells


def check_session(session: dict[str, Any]) -> list[str]:
    """Assert every output agrees with results.json; return the verdict column in collection order."""
    result, tests = session["result"], session["tests"]
    outcomes = [t["outcome"] for t in tests.values()]
    result.assert_outcomes(passed=outcomes.count("passed"), failed=outcomes.count("failed"),
                           errors=outcomes.count("error"))
    lines = result.outlines
    # pytest's own short summary ("FAILED id - message") is pytest's: under CI=true it is never shortened
    ours = [line for line in lines if not line.startswith(("FAILED ", "ERROR "))]
    assert not [line for line in ours if len(line) > 120], "a line over 120 columns at -q"
    assert not [line for line in lines if "USDT:" in line or "profiler_st" in line]
    table = rows(lines)
    verdicts = []
    for nodeid, test in tests.items():
        cells = cell_for(table, nodeid)
        fraction = "-" if test["fraction"] is None else f"{test['fraction']:.3f}"
        minimum = "-" if test["min_fraction"] is None else f"{test['min_fraction']:g}"
        assert cells[1:4] == [fraction, minimum, test["bound"] or "-"], (nodeid, cells)
        assert cells[7].startswith(test["outcome"]), (nodeid, cells)
        verdicts.append(cells[7])
    cases = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")}
             for c in session["junit"].iter("testcase")}
    kinds = {c.get("name"): {child.tag for child in c} for c in session["junit"].iter("testcase")}
    assert len(cases) == len(tests)  # one test case per test, however often it was reported
    for nodeid, test in tests.items():
        properties = cases[nodeid.split("::")[-1]]
        if test["fraction"] is not None:
            assert properties["roofline_fraction"] == f"{test['fraction']:.6g}"
            assert properties.get("roofline_bound") == test["bound"]
        failed = {"failed": "failure", "error": "error"}.get(test["outcome"])
        assert (failed in kinds[nodeid.split("::")[-1]]) if failed else not kinds[nodeid.split("::")[-1]] & {
            "failure", "error"}, (nodeid, kinds)
    for nodeid, test in tests.items():  # the step summary: the same outcome and fraction in the test's row
        (row,) = [line for line in session["summary"].splitlines() if f"`{nodeid}`" in line]
        cells = [c.strip() for c in row.split(" | ")]
        assert cells[2] == test["outcome"]
        assert cells[3] == ("" if test["fraction"] is None else f"{test['fraction']:.3f}")
    return verdicts


def test_serial_and_xdist_sessions_render_their_results_json_alike(pytester: pytest.Pytester,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   write_machine: Callable[..., Path]) -> None:
    pytest.importorskip("xdist")
    write_machine(MACHINE)
    pytester.makepyfile(test_suite=SUITE)
    serial = run(pytester, monkeypatch, "serial")
    parallel = run(pytester, monkeypatch, "xdist", "-n", "2")
    assert list(serial["tests"]) == list(parallel["tests"])
    assert check_session(serial) == check_session(parallel)
    for session in (serial, parallel):
        tests = session["tests"]
        assert tests["test_suite.py::test_below"]["outcome"] == "failed"
        nothing = tests["test_suite.py::test_nothing_counted"]
        assert nothing["outcome"] == "error" and nothing["artifacts"] == [] and "no_work" in nothing
        session["result"].stdout.fnmatch_lines(["*test_no_gate*passed (no gate)",
                                                "*test_nothing_counted*error (no work counted)",
                                                ("no work counted in test_suite.py::test_nothing_counted: "
                                                 "declare it with roofline.declare(*")])


def test_each_test_record_is_built_once_and_every_output_reads_it(pytester: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The JUnit properties, the step summary, results.json and the terminal rows all read the record built when
    the test's teardown report is made; none builds another. A conftest counts the builds in the session's own
    process (a subprocess: what an in-process run imports is dropped after it)."""
    pytester.makeconftest("""
        import json, os
        from pytest_roofline.record.tests import TestRecord

        BUILT = []
        real = TestRecord.of.__func__

        def counting(cls, measured, **fields):
            BUILT.append(fields["nodeid"])
            return real(cls, measured, **fields)

        TestRecord.of = classmethod(counting)

        def pytest_unconfigure(config):
            with open(os.path.join(str(config.rootpath), "built.json"), "w") as out:
                json.dump(BUILT, out)
    """)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "summary.md"))
    (pytester.path / "machine.json").write_text(json.dumps(MACHINE))
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(
        "-q", "--roofline", "--roofline-machine", str(pytester.path / "machine.json"), "--roofline-max-time", "0.05",
        "--roofline-confirm", "off", "--roofline-dir", "out", "-p", "no:cacheprovider", "--junitxml", "r.xml")
    document = json.loads((pytester.path / "out" / "results.json").read_text())
    built = json.loads((pytester.path / "built.json").read_text())
    assert len(document["tests"]) == 6  # three parametrized, the one below its threshold, two more
    assert sorted(built) == sorted(t["nodeid"] for t in document["tests"])  # one build each, no more
    properties = {case.get("name"): {p.get("name") for p in case.iter("property")}
                  for case in ET.parse(pytester.path / "r.xml").getroot().iter("testcase")}
    assert "roofline_fraction" in properties["test_below"] and "roofline_no_work" in properties["test_nothing_counted"]
    assert "test_below" in (pytester.path / "summary.md").read_text()
    result.assert_outcomes(passed=4, failed=1, errors=1)
