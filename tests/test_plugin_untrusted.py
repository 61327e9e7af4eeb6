"""Issue 26 through pytest: crafted baselines neither crash, silence nor trip the gate; a baseline or history
path that cannot be one is a usage error at start.

numpy and matplotlib are imported here, once (see test_plugin_history.py: pytester's in-process runs drop
modules first imported during a run).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib.pyplot  # noqa: F401
import numpy  # noqa: F401
import pytest

from pytest_roofline.record.machine_key import machine_key

MACHINE = {"name": "pinned-test-machine", "peak_flops": {"fp32": 100e9}, "bandwidth": {"DRAM": 10e9}}
KEY = machine_key(MACHINE)
TEST = """
import pytest, time

@pytest.mark.roofline
def test_step(roofline):
    roofline.declare(flops=1e8).measure(time.sleep, 0.002)
"""
NODEID = "test_untrusted_glue.py::test_step"


@pytest.fixture
def machine_file(pytester: pytest.Pytester, write_machine: Callable[..., Path]) -> Path:
    pytester.makepyfile(test_untrusted_glue=TEST)
    return write_machine(MACHINE)


def baseline_file(folder: Path, index: int, fraction: Any) -> Path:
    """A history file whose test read ``fraction`` (1 ms lower bound, 20 rounds)."""
    rounds = [1e-3 / fraction] * 20 if isinstance(fraction, float) and 0 < fraction < 1e3 else [2e-3] * 20
    doc = {"format": "pytest-roofline-history", "schema": 1,
           "session": {"id": f"base-{index}", "start": f"2026-11-25T06:0{index}:00+00:00", "git": {}},
           "machine": {"key": KEY, **MACHINE},
           "tests": [{"nodeid": NODEID, "fraction": fraction,
                      "regions": [{"t_min_s": 1e-3, "timing": {"samples_s": rounds}}]}]}
    path = folder / KEY / f"2026112{index}T060000Z-nogit-abcd.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))  # json.dumps writes NaN and Infinity as a hostile writer would
    return path


def recorded_baseline(pytester: pytest.Pytester) -> dict[str, Any]:
    return json.loads((pytester.path / ".roofline" / "results.json").read_text())["tests"][0]["baseline"]


@pytest.mark.parametrize(("fraction", "shown"), [(float("nan"), "nan"), (5.0, "5.0"), (1e308, "1e+308"),
                                                 (float("inf"), "inf")])
def test_a_crafted_baseline_is_skipped_with_a_warning_not_trusted(
        pytester: pytest.Pytester, machine_file: Path, run_roofline: Callable[..., pytest.RunResult],
        fraction: float, shown: str) -> None:
    path = baseline_file(pytester.path / "base", 0, fraction)
    result = run_roofline(machine_file, "--roofline-baseline", "base")
    assert result.ret == 0  # not REGRESSED against an impossible baseline
    expected = (f"roofline baseline: skipped 1 unreadable file(s) or test records under 'base': base/{KEY}/"
                f"{path.name}: skipped 1 test record(s) that cannot be trusted: tests[0] ('{NODEID}'): fraction: "
                f"{shown} is not a finite number in (0, 1.2]")
    assert result.stdout.str().count(expected) == 1
    assert recorded_baseline(pytester)["verdict"] == "new"  # said in the warning above, not silent


def test_a_sound_baseline_beside_crafted_files_still_gates(
        pytester: pytest.Pytester, machine_file: Path, run_roofline: Callable[..., pytest.RunResult]) -> None:
    for index in range(3):
        baseline_file(pytester.path / "base", index, 0.9)  # now it sleeps 2 ms: fraction < 0.5, a regression
    (pytester.path / "base" / KEY / "deep.json").write_text("[" * 100_000)
    result = run_roofline(machine_file, "--roofline-baseline", "base")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # not INTERNALERROR
    result.stdout.fnmatch_lines(["*regression against the baseline*",
                                 "*deep.json: nested deeper than 64 levels*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert recorded_baseline(pytester)["verdict"] == "regressed"


def test_a_baseline_that_is_no_history_is_a_usage_error(
        pytester: pytest.Pytester, machine_file: Path, run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makeconftest("import pytest\n")
    result = run_roofline(machine_file, "--roofline-baseline", "conftest.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([("ERROR: --roofline-baseline: 'conftest.py' is not a history directory, a history "
                                 "file or a results.json: Expecting value: line 1 column 1 (char 0)")])
    began = time.monotonic()
    result = run_roofline(machine_file, "--roofline-baseline=/dev/zero")  # spaced, it would move the rootdir
    assert result.ret == pytest.ExitCode.USAGE_ERROR and time.monotonic() - began < 10
    result.stderr.fnmatch_lines([("ERROR: --roofline-baseline: '/dev/zero' is not a history directory, a history "
                                 "file or a results.json: not a regular file")])
    junk = pytester.path / "junk.json"
    with junk.open("wb") as handle:
        handle.truncate(50_000_000)
    result = run_roofline(machine_file, "--roofline-baseline", "junk.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([("*'junk.json' is not a history directory*: 50000000 bytes, more than the "
                                 "33554432 a record file may have")])
    assert not (pytester.path / ".roofline" / "results.json").exists()  # refused before any test ran
