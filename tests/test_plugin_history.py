"""History files and the baseline gate through pytest (pinned machine, declared work).

numpy and matplotlib are imported here, once: the baseline gate uses numpy and a regression draws its chart,
and pytester's in-process runs drop modules first imported during a run (importing numpy twice crashes it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib.pyplot  # noqa: F401
import numpy  # noqa: F401
import pytest

from pytest_roofline.record.machine_key import machine_key

MACHINE = {"name": "pinned-test-machine", "peak_flops": {"fp32": 100e9}, "bandwidth": {"DRAM": 10e9}}
KEY = machine_key(MACHINE)

# 1e8 FLOPs at 100 GFLOP/s is 1 ms: a call that sleeps 2 ms reads a fraction a little under 0.5.
TEST = """
import pytest, time

@pytest.mark.roofline{marker}
@pytest.mark.parametrize("size", [2])
def test_step(roofline, size):
    roofline.declare(flops=1e8).measure(time.sleep, 0.001 * size)
"""
NODEID = "test_history_glue.py::test_step[2]"


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The baseline lines are matched whole here; at 80 columns the summary wraps them."""
    monkeypatch.setenv("COLUMNS", "250")


@pytest.fixture
def machine_file(pytester: pytest.Pytester, write_machine: Callable[..., Path]) -> Path:
    return write_machine(MACHINE)


def history_files(pytester: pytest.Pytester, folder: str = ".roofline/history") -> list[Path]:
    return sorted((pytester.path / folder).rglob("*.json"))


def fake_session(folder: Path, index: int, fraction: float, nodeid: str = NODEID, key: str = KEY,
                 commit: str | None = None) -> Path:
    """A history file whose test took 1 ms / fraction in every one of 20 rounds (t_min 1 ms)."""
    doc: dict[str, Any] = {
        "format": "pytest-roofline-history", "schema": 1,
        "session": {"id": f"base-{index}", "start": f"2026-11-25T06:0{index}:00+00:00",
                    "git": {"commit": commit or f"{index:040d}", "branch": None, "dirty": False}},
        "machine": {"key": key, **MACHINE},
        "tests": [{"nodeid": nodeid, "fraction": fraction,
                   "regions": [{"t_min_s": 1e-3, "timing": {"samples_s": [1e-3 / fraction] * 20}}]}],
    }
    path = folder / key / f"2026112{index}T060000Z-{index:012d}-abcd.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def test_every_session_appends_one_history_file(pytester: pytest.Pytester, machine_file: Path,
                                                run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_history_glue=TEST.format(marker=""))
    assert run_roofline(machine_file).ret == 0
    assert run_roofline(machine_file).ret == 0
    files = history_files(pytester)
    assert len(files) == 2 and all(f.parent.name == KEY for f in files)
    doc = json.loads(files[0].read_text())
    assert doc["format"] == "pytest-roofline-history" and doc["schema"] == 1
    assert doc["machine"]["key"] == KEY and doc["machine"]["peak_flops"] == {"fp32": 100e9}
    assert set(doc["session"]) >= {"id", "start", "end", "exit_status", "git", "versions", "pytest_args", "counter"}
    assert "--roofline" in doc["session"]["pytest_args"] and doc["session"]["counter"] == "declared"
    (test,) = doc["tests"]
    assert test["nodeid"] == NODEID and test["params"] == {"size": 2}
    assert test["function"] == "test_history_glue.py::test_step"
    assert len(test["regions"][0]["timing"]["samples_s"]) == test["regions"][0]["timing"]["rounds"]
    results = json.loads((pytester.path / ".roofline" / "results.json").read_text())
    assert results["tests"][0]["params"] == {"size": 2}  # the same record as results.json


def test_history_none_writes_no_history(pytester: pytest.Pytester, machine_file: Path,
                                        run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_history_glue=TEST.format(marker=""))
    assert run_roofline(machine_file, "--roofline-history", "none").ret == 0
    assert history_files(pytester) == []
    assert run_roofline(machine_file, "--roofline-history", "elsewhere").ret == 0
    assert len(history_files(pytester, "elsewhere")) == 1


def test_a_regression_fails_with_one_message_and_a_chart(pytester: pytest.Pytester, machine_file: Path,
                                                         run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_history_glue=TEST.format(marker=""))
    for index in range(3):
        fake_session(pytester.path / "base", index, 0.9)  # the baseline ran at 0.9; now it sleeps 2 ms (< 0.5)
    result = run_roofline(machine_file, "--roofline-baseline", "base")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*roofline: regression against the baseline: time ×1.* since the baseline; fraction 0.90 → 0.4*",
        "  time 2.* ms now, 1.11 ms in the baseline; fraction 0.4* now, 0.9 in the baseline (median of 3*",
        "*base-2 (000000000000))",  # the message fits 120 columns: the sessions go on a line of their own
        "  fails on: time per call rose more than max_slowdown 10%; fraction fell more than max_drop 10%",
        "  statistic: time ratio now/baseline 1.*, 95% CI [[]1.*]; fraction ratio now/baseline 0.5*, 95% CI*",
        "*measured again at once*",
        "*.png",
        "*REGRESSED: test_history_glue.py::test_step[[]2]: time ×1.* since the baseline; fraction 0.90 → 0.4*",
    ])
    record = json.loads((pytester.path / ".roofline" / "results.json").read_text())["tests"][0]
    baseline = record["baseline"]
    assert baseline["verdict"] == "regressed" and baseline["fraction"] == pytest.approx(0.9)
    assert baseline["sessions"] == ["base-0", "base-1", "base-2"] and baseline["ci"][1] < 1
    assert Path(record["artifacts"][0]).is_file()


def test_warn_only_reports_and_fails_nothing(pytester: pytest.Pytester, machine_file: Path,
                                             run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_history_glue=TEST.format(marker="(min_fraction=0.95)"))
    for index in range(3):
        fake_session(pytester.path / "base", index, 0.9)
    result = run_roofline(machine_file, "--roofline-baseline", "base", "--roofline-warn-only")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*RooflineWarning: roofline: attained fraction*below min_fraction 0.95*",
                                 "*--roofline-warn-only: reported, not failed*"])
    record = json.loads((pytester.path / ".roofline" / "results.json").read_text())["tests"][0]
    assert record["baseline"]["verdict"] == "regressed"  # compared, for the record, though the threshold failed


def test_clean_sessions_against_their_own_history_pass(pytester: pytest.Pytester, machine_file: Path,
                                                       run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_history_glue=TEST.format(marker="(max_drop=0.5)"))
    for _ in range(3):
        assert run_roofline(machine_file).ret == 0
    result = run_roofline(machine_file, "--roofline-baseline", ".roofline/history")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*passed (steady)*", "baseline .roofline/history: per test, its last 5*",
                                 "*1 steady"])


def test_other_machines_are_left_out_unless_asked(pytester: pytest.Pytester, machine_file: Path,
                                                  run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_history_glue=TEST.format(marker=""))
    for index in range(3):
        fake_session(pytester.path / "base", index, 0.9, key="another-machine-00000000")
    result = run_roofline(machine_file, "--roofline-baseline", "base")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*no session of this machine*every test is new*another-machine-00000000*"])
    record = json.loads((pytester.path / ".roofline" / "results.json").read_text())["tests"][0]
    assert record["baseline"]["verdict"] == "new" and record["baseline"]["sessions"] == []
    assert run_roofline(machine_file, "--roofline-baseline", "base", "--roofline-baseline-any-machine").ret == 1


def test_bad_history_files_are_skipped_with_one_warning(pytester: pytest.Pytester, machine_file: Path,
                                                        run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_history_glue=TEST.format(marker=""))
    fake_session(pytester.path / "base", 0, 0.45)
    (pytester.path / "base" / KEY / "broken.json").write_text("{")
    (pytester.path / "base" / KEY / "newer.json").write_text(json.dumps({"format": "pytest-roofline-history",
                                                                         "schema": 2, "tests": []}))
    result = run_roofline(machine_file, "--roofline-baseline", "base", "--roofline-max-drop", "0.5")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*skipped 2 unreadable file(s)*broken.json*newer.json*schema 2 is newer*"])
    assert result.stdout.str().count("skipped 2 unreadable") == 1


def test_a_missing_baseline_and_bad_max_drop_are_usage_errors(pytester: pytest.Pytester,
                                                              machine_file: Path,
                                                              run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_history_glue=TEST.format(marker=""))
    result = run_roofline(machine_file, "--roofline-baseline", "nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--roofline-baseline: no such file or directory 'nowhere'*"])
    result = run_roofline(machine_file, "--roofline-max-drop", "10%")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--roofline-max-drop must be a number in (0, 1) such as 0.1*'10%'*"])


def test_max_drop_marker_argument_is_validated(pytester: pytest.Pytester, machine_file: Path,
                                               run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_history_glue=TEST.format(marker="(max_drop=10)"))
    result = run_roofline(machine_file)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*@pytest.mark.roofline(max_drop=...) must be a number in (0, 1)*got 10*"])


def test_an_unwritable_history_is_a_usage_error_at_start(pytester: pytest.Pytester, machine_file: Path,
                                                         run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_history_glue=TEST.format(marker=""))
    (pytester.path / "blocked").write_text("a file where the history folder should be")
    result = run_roofline(machine_file, "--roofline-history", "blocked/deeper")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --roofline-history: 'blocked' is not a directory"])
    assert not (pytester.path / ".roofline" / "results.json").exists()  # refused before any test ran


def test_a_history_blocked_during_the_session_is_said_in_the_summary(
        pytester: pytest.Pytester, machine_file: Path, run_roofline: Callable[..., pytest.RunResult]) -> None:
    # A file put where the history goes after the check at start: the write fails, the summary says so.
    pytester.makepyfile(test_history_glue=TEST.format(marker="") + """
def test_blocks_the_history():
    open("blocked", "w").write("a file where the history folder should be")
""")
    result = run_roofline(machine_file, "--roofline-history", "blocked")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*roofline: could not write the history under 'blocked'*"])
    assert (pytester.path / ".roofline" / "results.json").is_file()


def test_a_contended_regression_is_reported_then_failed_when_free_at_the_end(
        pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch,
        run_roofline: Callable[..., pytest.RunResult], fake_core_load: Callable[..., None]) -> None:
    from pytest_roofline.host import cores

    pytester.makepyfile(test_history_glue=TEST.format(marker=""))
    for index in range(3):
        fake_session(pytester.path / "base", index, 0.9)
    busy = {c: 1.0 for c in cores.base_affinity()}
    fake_core_load(iter([busy] * 10))
    result = run_roofline(machine_file, "--roofline-baseline", "base", "--roofline-contended", "excuse")
    assert result.ret == 0  # contended all along: reported, not failed
    result.stdout.fnmatch_lines(["*REGRESSED (contended: not failed): test_history_glue.py::test_step*"])
    fake_core_load(iter([busy, {c: 0.0 for c in cores.base_affinity()}]))
    result = run_roofline(machine_file, "--roofline-baseline", "base")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # measured again, free, at the end: still regressed
    record = json.loads((pytester.path / ".roofline" / "results.json").read_text())["tests"][0]
    assert record["outcome"] == "failed" and record["contended"]["failed_when_remeasured"] is True
    assert record["baseline"]["verdict"] == "regressed" and "excused" not in record["baseline"]


# The call does its work `k` times: declared FLOPs and sleep both scale with ROOFLINE_TEST_K, like a change
# that runs every op twice. The sleep's own overhead makes the fraction a little under 0.5 at every k.
TWICE = """
import os, pytest, time

@pytest.mark.roofline{marker}
def test_step(roofline):
    k = int(os.environ.get("ROOFLINE_TEST_K", "1"))
    work = int(os.environ.get("ROOFLINE_TEST_WORK", str(k)))
    roofline.declare(flops=1e8 * work).measure(time.sleep, 0.002 * k)
"""


def test_twice_the_work_at_the_same_fraction_fails_on_time(pytester: pytest.Pytester, machine_file: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_twice=TWICE.format(marker=""))
    for _ in range(3):
        assert run_roofline(machine_file).ret == 0
    monkeypatch.setenv("ROOFLINE_TEST_K", "2")
    result = run_roofline(machine_file, "--roofline-baseline", ".roofline/history")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # a loaded host stretches a 2 ms sleep more than a 4 ms one: the fraction may move too, the rest may not
    result.stdout.fnmatch_lines([
        "*roofline: regression against the baseline: time ×[12].* since the baseline: work ×2.00 * fraction*",
        "  time 4.* ms now, 2.* ms in the baseline; fraction 0.* now, 0.* in the baseline (median of 3 sessions*",
        "  fails on: time per call rose more than max_slowdown 10%*",
        "  work: 2e+08 FLOPs now, 1e+08 in the baseline",
    ])
    record = json.loads((pytester.path / ".roofline" / "results.json").read_text())["tests"][0]["baseline"]
    assert record["verdict"] == "regressed" and "time" in record["failed_on"]
    changes = record["changes"]
    assert changes["time"]["ratio"] == pytest.approx(2.0, rel=0.25) and changes["time"]["verdict"] == "worse"
    assert changes["work"]["ratio"] == 2.0
    assert changes["work"]["verdict"] == "more"


def test_a_change_of_work_alone_is_reported_and_fails_only_when_asked(
        pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch,
        run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_twice=TWICE.format(marker=""))
    for _ in range(3):
        assert run_roofline(machine_file).ret == 0
    monkeypatch.setenv("ROOFLINE_TEST_WORK", "2")  # twice the counted FLOPs in the same time: a recount
    result = run_roofline(machine_file, "--roofline-baseline", ".roofline/history")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*passed (changed)*", ("  changed, not gated: test_twice.py::test_step: time ×* "
                                 "since the baseline: work ×2.00 and fraction 0.* → 0.9*")])
    result = run_roofline(machine_file, "--roofline-baseline", ".roofline/history", "--roofline-fail-on", "work")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*fails on: the counted work changed (fail_on includes work)*"])


def test_too_few_baseline_sessions_are_inconclusive_never_failed(
        pytester: pytest.Pytester, machine_file: Path, run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_history_glue=TEST.format(marker=""))
    fake_session(pytester.path / "base", 0, 0.9)  # one session at 0.9; now it runs at under 0.5
    result = run_roofline(machine_file, "--roofline-baseline", "base")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*passed (inconclusive)*",
                                 ("  inconclusive: test_history_glue.py::test_step[[]2]: inconclusive: too few "
                                 "sessions to measure the spread: a test needs 3 baseline sessions (2 more of this "
                                 "test)*")])


def test_fail_on_and_max_slowdown_are_validated(pytester: pytest.Pytester, machine_file: Path,
                                                run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_history_glue=TEST.format(marker=""))
    result = run_roofline(machine_file, "--roofline-fail-on", "speed")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--roofline-fail-on must name one or more of time, fraction, work*'speed'*"])
    result = run_roofline(machine_file, "--roofline-max-slowdown", "-1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    pytester.makepyfile(test_history_glue=TEST.format(marker="(fail_on=['tim'])"))
    result = run_roofline(machine_file)
    result.stdout.fnmatch_lines(["*@pytest.mark.roofline(fail_on=...) must name one or more of time, fraction*"])
