"""The CI recipe's guarantees through pytester: a contended test is judged under a gate, gate options imply
--roofline, a spaced path cannot move the rootdir, a baseline never holds the commit under test, and a
baseline whose node ids all differ is a warning.

Pinned machine (1e8 FLOPs take 1 ms at its roof), declared work, faked core load; no timing asserts: a 2 ms
sleep against a 1.11 ms baseline is ×1.8, far beyond any tolerance these tests widen.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib.pyplot  # noqa: F401
import numpy  # noqa: F401
import pytest
from test_plugin_history import fake_session as history_session

from pytest_roofline.measure import contention
from pytest_roofline.record.machine_key import machine_key

MACHINE = {"name": "pinned-test-machine", "peak_flops": {"fp32": 100e9}, "bandwidth": {"DRAM": 10e9}}
KEY = machine_key(MACHINE)
TEST = """
import pytest, time

@pytest.mark.roofline{marker}
def test_step(roofline):
    roofline.declare(flops=1e8).measure(time.sleep, 0.002)
"""
NODEID = "test_step_ci.py::test_step"


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")


@pytest.fixture
def machine_file(write_machine: Callable[..., Path]) -> Path:
    return write_machine(MACHINE)


def fake_session(folder: Path, index: int, fraction: float, nodeid: str = NODEID, commit: str | None = None) -> None:
    """A history file whose test took 1 ms / fraction in each of 20 rounds (t_min 1 ms)."""
    history_session(folder, index, fraction, nodeid, commit=commit)


def record(pytester: pytest.Pytester) -> dict[str, Any]:
    return json.loads((pytester.path / ".roofline" / "results.json").read_text())["tests"][0]


def all_busy(fake_core_load: Callable[..., None]) -> None:
    from pytest_roofline.host import cores

    fake_core_load(iter([{c: 1.0 for c in cores.base_affinity()}] * 20))


# -- contention ------------------------------------------------------------------------------------------------


def test_spread_and_widened_tolerances_by_hand() -> None:
    assert contention.spread([2.0], [2.4]) == pytest.approx(0.2)  # 2.4 / 2.0 - 1
    assert contention.spread([1.0], [1.0], [0.07]) == pytest.approx(0.07)  # the calls' IQR is wider
    assert contention.spread([1.0], [9.0]) == contention.MAX_SPREAD  # capped: a 2x slowdown always fails
    drop, slowdown = contention.widened_tolerances(0.10, 0.10, 0.2)
    assert slowdown == pytest.approx(0.30) and drop == pytest.approx(1 - 0.9 / 1.2)
    assert contention.widened_min_fraction(0.6, 0.2) == pytest.approx(0.5)


def test_auto_judges_in_ci_and_under_a_gate() -> None:
    assert contention.resolve("auto", baseline=False, compare=False, environ={}) == "excuse"
    assert contention.resolve("auto", baseline=False, compare=False, environ={"CI": "true"}) == "judge"
    assert contention.resolve("auto", baseline=False, compare=False, environ={"CI": "false"}) == "excuse"
    assert contention.resolve("auto", baseline=True, compare=False, environ={}) == "judge"
    assert contention.resolve("auto", baseline=False, compare=True, environ={}) == "judge"
    assert contention.resolve("excuse", baseline=True, compare=True, environ={"CI": "1"}) == "excuse"


def test_a_contended_regression_fails_under_the_baseline_gate(
        pytester: pytest.Pytester, machine_file: Path, run_roofline: Callable[..., pytest.RunResult],
        fake_core_load: Callable[..., None]) -> None:
    pytester.makepyfile(test_step_ci=TEST.format(marker=""))
    for index in range(3):
        fake_session(pytester.path / "base", index, 0.9)  # 1.11 ms; now 2 ms and more
    all_busy(fake_core_load)
    result = run_roofline(machine_file, "--roofline-baseline", "base")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*judged while still contended*"])
    test = record(pytester)
    assert test["outcome"] == "failed" and test["contended"]["judged"] is True
    assert 0 <= test["contended"]["spread"] <= contention.MAX_SPREAD
    assert test["baseline"]["verdict"] == "regressed" and "excused" not in test["baseline"]


def test_a_contended_unchanged_test_passes_under_the_baseline_gate(
        pytester: pytest.Pytester, machine_file: Path, run_roofline: Callable[..., pytest.RunResult],
        fake_core_load: Callable[..., None]) -> None:
    pytester.makepyfile(test_step_ci=TEST.format(marker=""))
    for index in range(3):
        fake_session(pytester.path / "base", index, 0.45)  # 2.2 ms: the sleep as it is now, give or take
    all_busy(fake_core_load)
    result = run_roofline(machine_file, "--roofline-baseline", "base")
    assert result.ret == 0, result.stdout.str()
    assert record(pytester)["baseline"]["verdict"] != "regressed"


def test_a_contended_test_below_its_threshold_fails_in_ci(
        pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch,
        run_roofline: Callable[..., pytest.RunResult], fake_core_load: Callable[..., None]) -> None:
    pytester.makepyfile(test_step_ci=TEST.format(marker="(min_fraction=0.9)"))
    all_busy(fake_core_load)
    assert run_roofline(machine_file).ret == 0  # a workstation: excused, reported
    assert record(pytester)["not_gated"] == "contended"
    monkeypatch.setenv("CI", "true")
    all_busy(fake_core_load)
    result = run_roofline(machine_file)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*is below min_fraction 0.9*", "*judged while still contended*"])


# -- no silent no-ops ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("option", [["--roofline-warn-only"], ["--roofline-history=hist"],
                                    ["--roofline-max-slowdown=0.2"], ["--roofline-strict"]])
def test_a_gate_option_implies_roofline(pytester: pytest.Pytester, machine_file: Path, option: list[str]) -> None:
    pytester.makepyfile(test_step_ci=TEST.format(marker=""))
    result = pytester.runpytest("--roofline-machine", str(machine_file), "--roofline-max-time", "0.05",
                                "-p", "no:cacheprovider", *option)
    assert result.ret == 0
    assert record(pytester)["nodeid"] == NODEID  # measured, results written
    result.stdout.fnmatch_lines(["*= roofline =*"])


def test_without_a_gate_option_nothing_is_measured(pytester: pytest.Pytester, machine_file: Path) -> None:
    pytester.makepyfile(test_step_ci=TEST.format(marker=""))
    assert pytester.runpytest("--roofline-machine", str(machine_file), "-p", "no:cacheprovider").ret == 0
    assert not (pytester.path / ".roofline" / "results.json").exists()


def test_a_spaced_path_that_moves_the_rootdir_is_a_usage_error(pytester: pytest.Pytester, machine_file: Path,
                                                               tmp_path_factory: pytest.TempPathFactory) -> None:
    pytester.makepyfile(test_step_ci=TEST.format(marker=""))
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    result = pytester.runpytest(f"--roofline-machine={machine_file}", "--roofline-history", str(elsewhere),
                                "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([(f"ERROR: --roofline-history {elsewhere}: pytest took the value for a test path*"
                                  f"moved the rootdir*Write it with '=': --roofline-history={elsewhere}")])
    result = pytester.runpytest(f"--roofline-machine={machine_file}", f"--roofline-history={elsewhere}",
                                "--roofline-max-time", "0.05", "-p", "no:cacheprovider")
    assert result.ret == 0  # the '=' form: the rootdir stays
    assert record(pytester)["nodeid"] == NODEID


def test_a_baseline_none_of_whose_ids_match_is_a_warning(pytester: pytest.Pytester, machine_file: Path,
                                                         run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_step_ci=TEST.format(marker=""))
    for index in range(3):
        fake_session(pytester.path / "base", index, 0.45, nodeid=f"tests/{NODEID}")
    result = run_roofline(machine_file, "--roofline-baseline", "base")
    assert result.ret == 0
    result.stdout.fnmatch_lines([(f"*none of the 1 node id(s) in base is one of this session's 1: the baseline has "
                                  f"e.g. 'tests/{NODEID}', this session '{NODEID}'*")])


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_a_history_baseline_leaves_out_the_commit_under_test(pytester: pytest.Pytester, machine_file: Path,
                                                             run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_step_ci=TEST.format(marker=""))
    (pytester.path / ".gitignore").write_text(".roofline/\nbase/\n__pycache__/\n")
    _git(pytester.path, "init", "-q")
    _git(pytester.path, "add", "-A")
    _git(pytester.path, "commit", "-qm", "one")
    head = _git(pytester.path, "rev-parse", "HEAD")
    for index in range(3):  # fast sessions of this very commit: were they the baseline, the test regressed
        fake_session(pytester.path / "base", index, 0.9, commit=head)
    result = run_roofline(machine_file, "--roofline-baseline", "base")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*no session of this machine*3 session(s) of the commit under test*left out*"])
    assert record(pytester)["baseline"]["verdict"] == "new"


def test_the_history_directory_as_baseline_before_it_exists_is_a_first_run(
        pytester: pytest.Pytester, machine_file: Path, run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_step_ci=TEST.format(marker=""))
    result = run_roofline(machine_file, "--roofline-baseline", ".roofline/history")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*no history in '.roofline/history' yet: every test is new*"])
    assert record(pytester)["baseline"]["verdict"] == "new"
    assert len(list((pytester.path / ".roofline" / "history").rglob("*.json"))) == 1  # the history begins
    result = run_roofline(machine_file, "--roofline-baseline", "elsewhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # any other missing path is still a typo


def test_pytest_markers_lists_every_marker_argument(pytester: pytest.Pytester) -> None:
    from pytest_roofline.session.settings import MARKER_ARGUMENTS

    result = pytester.runpytest("--markers", "-p", "no:cacheprovider")
    text = " ".join(line.strip() for line in result.stdout.lines)  # pytest wraps the help
    start = text.index("@pytest.mark.roofline(")
    assert [a for a in MARKER_ARGUMENTS if f"{a}=" not in text[start:start + 1200]] == []
