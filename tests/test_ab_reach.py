"""``ab.reach``: an A/B session compares only the tests the change between REF and this checkout reaches; the
others are timed as in a plain session and reported unchanged at REF. Unit rules on fakes, then sessions of a
git repository made by the test (REF's twins started for real; the measured calls sleep, so a doubled sleep is
a doubled time whatever the host does)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot  # noqa: F401 - imported once, before pytester's in-process runs
import numpy  # noqa: F401
import pytest
from test_ab_plugin import committed_repo

from pytest_roofline.ab.impact import Reason
from pytest_roofline.ab.reach import Cost, TestReach

MACHINE = {"name": "pinned-test-machine", "peak_flops": {"fp32": 100e9}, "bandwidth": {"DRAM": 10e9}}


def test_the_pairs_begin_at_the_first_call_site_the_change_reaches() -> None:
    answers = iter([None, None, Reason("function", "runs mypkg.py::slow, changed")])
    begun: list[int] = []
    link = object()
    def begin(site: int) -> object:
        begun.append(site)
        return link

    test = TestReach("t.py::test", lambda: next(answers), begin)  # type: ignore[arg-type]
    assert test.next_site() is None and test.next_site() is None and test.unchanged
    assert test.next_site() is link and begun == [2]  # two call sites timed here first
    assert test.next_site() is link and begun == [2]  # begun once; every later call site is paired
    assert not test.unchanged and str(test.reason) == "runs mypkg.py::slow, changed"


def test_a_test_the_pool_cannot_run_is_begun_but_not_linked() -> None:
    test = TestReach("t.py::test", lambda: Reason("module", "imports mypkg.py"), lambda site: None)
    assert test.next_site() is None and test.begun and not test.unchanged
    assert test.next_site() is None  # never asked twice


def test_a_change_of_no_python_file_reaches_no_test_and_traces_none(tmp_path: Path) -> None:
    from pytest_roofline.ab.impact import Change, FileChange, Opaque
    from pytest_roofline.ab.reach import Reach

    class NeverTraced:
        def result(self) -> None:
            raise AssertionError("a test was traced where no change can reach it")

    reach = Reach(tmp_path, "0" * 40, None)
    reach._change = Change("0" * 40, no_impact=("README.md", "docs/index.md"))
    assert reach.reaches_none and reach.reaches("t.py::test", NeverTraced(), []) is None  # type: ignore[arg-type]
    reach._change = Change("0" * 40, opaque=(Opaque("data.csv", "a data file"),))
    assert not reach.reaches_none  # every test compared: nothing to trace either, but every test is reached
    reach._change = Change("0" * 40, python=(FileChange("mypkg.py", "modified", None, frozenset({"slow"})),))
    assert not reach.reaches_none
    forced = Reach(tmp_path, "0" * 40, "--roofline-compare-all")
    said = forced.reaches("t.py::test", NeverTraced(), [])  # type: ignore[arg-type]
    assert said == Reason("compare-all", "--roofline-compare-all")


def test_the_cost_line_states_counts_seconds_and_the_ratio() -> None:
    cost = Cost(pool_start_s=10.0, paired_s=30.0, session_start=0.0)
    import time

    now = time.monotonic()
    cost.session_start = now - 80.0  # the session ran 80 s, 40 of them comparing: x2 of the 40 without
    line = cost.describe(2, 7)
    assert line.startswith("compare: 2 of 9 test(s) compared (7 unchanged at REF: not compared); the comparison "
                           "took 40.0 s (pool start 10.0 s), x2.0 of this session without it")
    assert Cost(session_start=now).describe(0, 3) == ("compare: 0 of 3 test(s) compared (3 unchanged at REF: not "
                                                      "compared); the comparison took 0.0 s (pool start 0.0 s)")


CODE = '''
import time


def fast():
    time.sleep({fast})


def slow():
    time.sleep({slow})
'''

TESTS = '''
import pytest
from mypkg import fast, slow


@pytest.mark.roofline
def test_fast(roofline):
    roofline.declare(flops=1e7).measure(fast)


@pytest.mark.roofline
def test_slow(roofline):
    roofline.declare(flops=1e7).measure(slow)
'''


@pytest.fixture
def repo(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COLUMNS", "250")
    return committed_repo(pytester.path, {"mypkg.py": CODE.format(fast=0.002, slow=0.002), "test_perf.py": TESTS},
                          monkeypatch)


def verdicts(path: Path) -> dict[str, str]:
    tests = json.loads((path / ".roofline" / "results.json").read_text())["tests"]
    return {t["nodeid"]: t["compare"]["verdict"] for t in tests}


def test_a_change_inside_one_function_compares_only_the_test_that_runs_it(
        repo: Path, write_machine: Callable[..., Path], run_roofline: Callable[..., pytest.RunResult]) -> None:
    (repo / "mypkg.py").write_text(CODE.format(fast=0.002, slow=0.004))  # uncommitted: the working tree counts
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert verdicts(repo) == {"test_perf.py::test_fast": "unchanged", "test_perf.py::test_slow": "regressed"}
    result.stdout.fnmatch_lines(["*compare: 1 of 2 test(s) compared (1 unchanged at REF: not compared)*",
                                 "*test_perf.py::test_fast*unchanged at REF: not compared*"])


def test_a_docs_only_change_compares_nothing_and_starts_no_twin(
        repo: Path, write_machine: Callable[..., Path], run_roofline: Callable[..., pytest.RunResult]) -> None:
    (repo / "README.md").write_text("docs only\n")
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD")
    assert result.ret == 0, result.stdout.str()
    assert verdicts(repo) == {"test_perf.py::test_fast": "unchanged", "test_perf.py::test_slow": "unchanged"}
    result.stdout.fnmatch_lines([("*compare: 0 of 2 test(s) compared (2 unchanged at REF: not compared); the "
                                 "comparison took 0.0 s (pool start 0.0 s)*")])
    logs = list((repo / ".roofline").rglob("twin-*.log"))
    assert logs == []  # no twin was started


def test_compare_all_and_an_opaque_change_compare_every_test(
        repo: Path, write_machine: Callable[..., Path], run_roofline: Callable[..., pytest.RunResult]) -> None:
    machine = write_machine(MACHINE)
    result = run_roofline(machine, "--roofline-compare", "HEAD", "--roofline-compare-all")
    assert result.ret == 0, result.stdout.str()
    assert set(verdicts(repo).values()) <= {"steady", "inconclusive"}
    result.stdout.fnmatch_lines(["*compare: 2 of 2 test(s) compared*",
                                 "*compare: every test compared: --roofline-compare-all*"])
    (repo / "data.csv").write_text("1,2\n")  # a file tracing cannot see into
    result = run_roofline(machine, "--roofline-compare", "HEAD")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*compare: 2 of 2 test(s) compared*", "*every test compared: *data.csv*"])
