"""Reports are never lost: the results directory is checked up front, a late write failure is one line, and
concurrent sessions each keep their own complete record."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_roofline._atomic import write_text_atomic
from pytest_roofline.history.results_dir import RESULTS_FILE, new_session_id, prune_sessions

MACHINE = {"name": "pinned-test-machine", "peak_flops": {"fp32": "100 GFLOP/s"},
           "bandwidth": {"DRAM": "10 GB/s"}, "info": {"source": "test"}}

BELOW = """
import time
import pytest

@pytest.mark.roofline(min_fraction=0.5)
def test_slow(roofline):
    roofline.declare(flops=1e6).measure(time.sleep, 0.002)

@pytest.mark.roofline
def test_ok(roofline):
    roofline.declare(flops=1e6).measure(time.sleep, 0.001)
"""


@pytest.fixture
def machine_file(pytester: pytest.Pytester, write_machine: Callable[..., Path]) -> Path:
    return write_machine(MACHINE)


@pytest.mark.parametrize("layout", ["file", "under-a-file", "results-is-a-dir"])
def test_unusable_results_dir_is_a_usage_error_before_any_test(pytester: pytest.Pytester, machine_file: Path,
                                                               layout: str,
                                                               run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(BELOW)
    target = pytester.path / "out"
    if layout == "file":
        target.write_text("not a directory")
    elif layout == "under-a-file":
        target.write_text("a file")
        target = target / "deeper"
    else:
        (target / RESULTS_FILE).mkdir(parents=True)
    result = run_roofline(machine_file, "--roofline-dir", str(target))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--roofline-dir" in err and ("out" in err)
    assert "test_slow" not in result.stdout.str()


def test_a_late_write_failure_is_one_line_and_the_verdicts_still_print(
        pytester: pytest.Pytester, machine_file: Path, run_roofline: Callable[..., pytest.RunResult]) -> None:
    # The test itself turns the sessions folder into a file, as a full disk or a cleanup job would break it.
    pytester.makepyfile(BELOW + """
import shutil
from pathlib import Path

def test_break_the_results_dir():
    sessions = Path(".roofline") / "sessions"
    shutil.rmtree(sessions)
    sessions.write_text("in the way")
""")
    result = run_roofline(machine_file)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # test_slow failed; not an internal error
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    result.stdout.fnmatch_lines(["*= FAILURES =*", "*attained fraction*", "*= roofline =*",
                                 "roofline: could not write the results under*",
                                 "*short test summary info*", "FAILED *test_slow*"])


def test_all_passed_run_with_a_late_write_failure_exits_one(pytester: pytest.Pytester, machine_file: Path,
                                                             run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile("""
import shutil, time
from pathlib import Path
import pytest

@pytest.mark.roofline
def test_ok(roofline):
    roofline.declare(flops=1e6).measure(time.sleep, 0.001)
    sessions = Path(".roofline") / "sessions"
    shutil.rmtree(sessions)
    sessions.write_text("in the way")
""")
    result = run_roofline(machine_file)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # nothing saved: not a silent pass (issue 35)
    result.stdout.fnmatch_lines(["roofline: could not write the results under*",
                                 "roofline: exit status 1: the tests passed, but this run's results were not saved"])


def test_a_full_disk_never_announces_the_old_results_as_this_runs(
        pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch,
        run_roofline: Callable[..., pytest.RunResult]) -> None:
    import errno

    from pytest_roofline.history import results_dir

    pytester.makepyfile("""
import time
import pytest

@pytest.mark.roofline
def test_ok(roofline):
    roofline.declare(flops=1e6).measure(time.sleep, 0.001)
""")
    assert run_roofline(machine_file).ret == pytest.ExitCode.OK  # an earlier run's results.json
    old = pytester.path / ".roofline" / "results.json"
    earlier = json.loads(old.read_text())["session"]["id"]

    def full(path: Path, document: object) -> Path:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(results_dir, "write_json_atomic", full)
    result = run_roofline(machine_file)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([("roofline: could not write the results under '.roofline': No space left on device;"
                                 " the earlier session's .roofline/results.json was removed*"),
                                 "roofline: exit status 1: the tests passed, but this run's results were not saved"])
    assert "results: .roofline/results.json" not in result.stdout.str()
    assert not old.exists()
    assert (pytester.path / ".roofline" / "sessions" / earlier / "results.json").is_file()  # its own copy stays


def test_results_record_the_session_and_artifacts_follow_the_umask(
        pytester: pytest.Pytester, machine_file: Path, run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(BELOW)
    old = os.umask(0o022)
    try:
        result = run_roofline(machine_file)
    finally:
        os.umask(old)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    top = pytester.path / ".roofline" / RESULTS_FILE
    doc = json.loads(top.read_text())
    session = doc["session"]
    assert session["exit_status"] == 1 and session["interrupted"] is False
    assert session["start"] <= session["end"]
    own = Path(session["directory"])
    assert json.loads((own / RESULTS_FILE).read_text()) == doc
    (slow,) = [t for t in doc["tests"] if t["nodeid"].endswith("test_slow")]
    assert slow["artifacts"] and all(Path(a).parent == own for a in slow["artifacts"])
    for path in [top, own / RESULTS_FILE, *map(Path, slow["artifacts"])]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_interrupted_session_still_writes_its_record(pytester: pytest.Pytester, machine_file: Path,
                                                     fast_args: tuple[str, ...]) -> None:
    pytester.makepyfile(BELOW + """
def test_stop():
    raise KeyboardInterrupt

def test_never_reached(roofline):
    roofline.declare(flops=1e6).measure(lambda: None)
""")
    # In a child process: an in-process run would pass the interrupt on to this test session.
    result = pytester.runpytest_subprocess("--roofline", "--roofline-machine", str(machine_file), *fast_args)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    doc = json.loads((pytester.path / ".roofline" / RESULTS_FILE).read_text())
    assert doc["session"]["interrupted"] is True and doc["session"]["exit_status"] == 2
    outcomes = {t["nodeid"].split("::")[-1]: t["outcome"] for t in doc["tests"]}
    # Tests after the interrupt never set up their fixture: absent, and "interrupted" says the list is partial.
    assert outcomes == {"test_slow": "failed", "test_ok": "passed"}


def test_concurrent_sessions_each_keep_a_complete_record(pytester: pytest.Pytester, machine_file: Path,
                                                         fast_args: tuple[str, ...]) -> None:
    for index in range(4):
        pytester.makepyfile(**{f"test_s{index}": BELOW})
    shared = pytester.path / "shared-dir"
    commands = [[sys.executable, "-m", "pytest", "--roofline", "--roofline-machine", str(machine_file), *fast_args,
                 "--roofline-dir", str(shared), f"test_s{index}.py"] for index in range(4)]
    processes = [subprocess.Popen(c, cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for c in commands]
    assert [p.wait(timeout=120) for p in processes] == [1, 1, 1, 1]
    records = [json.loads((d / RESULTS_FILE).read_text()) for d in (shared / "sessions").iterdir()]
    assert sorted(r["tests"][0]["nodeid"].split("::")[0] for r in records) == [f"test_s{i}.py" for i in range(4)]
    for record in records:
        own = Path(record["session"]["directory"])
        assert len(record["tests"]) == 2
        artifacts = [Path(a) for t in record["tests"] for a in t["artifacts"]]
        assert len(artifacts) == 2 and all(a.parent == own and a.is_file() for a in artifacts)
    assert json.loads((shared / RESULTS_FILE).read_text()) in records


def test_prune_keeps_the_newest_finished_sessions_and_never_a_running_one(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    names = [f"2026010{day}T000000.000Z-1" for day in range(1, 6)]
    for name in names:
        write_text_atomic(root / name / RESULTS_FILE, "{}")
    (root / "20260100T000000.000Z-9").mkdir()  # older, but still running: no results.json yet
    removed = prune_sessions(tmp_path, keep=2, current=names[0])
    assert sorted(p.name for p in removed) == names[1:3]
    assert sorted(p.name for p in root.iterdir()) == ["20260100T000000.000Z-9", names[0], *names[3:]]


def test_session_ids_sort_by_time() -> None:
    import datetime as dt

    early = new_session_id(dt.datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=dt.timezone.utc), 77)
    late = new_session_id(dt.datetime(2026, 1, 2, 3, 4, 5, 7000, tzinfo=dt.timezone.utc), 1)
    assert early == "20260102T030405.006Z-77" and early < late


def test_roofline_machine_without_roofline_says_what_it_does(pytester: pytest.Pytester, machine_file: Path) -> None:
    pytester.makepyfile("""
def test_uses_ceilings(roofline_machine):
    assert roofline_machine.peak_flops["fp32"] == 100e9
""")
    result = pytester.runpytest("--roofline-machine", str(machine_file), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    expected = "*RooflineWarning: roofline_machine without --roofline: loading the pinned ceilings of*machine.json*"
    result.stdout.fnmatch_lines([expected])
