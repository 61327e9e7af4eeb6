"""``--roofline-compare`` when something goes wrong: a gate that could not compare never reads as a pass (issue 35).

Each test plants a regression (the step runs twice at HEAD) and a fault: REF's twin dies, REF does not import,
the code lives in a submodule, the project's ``addopts`` ask for xdist, the test path is absolute. The run must
fail (never rc 0 with the regression inside) and show no traceback from the plugin's internals.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from test_ab_plugin import CODE, MACHINE, TEST, commit, git, repo, results  # noqa: F401 - repo: a fixture

TWO_TESTS = """
import pytest
from mypkg import step, REPEAT

@pytest.fixture
def teardown_exit():
    yield
{teardown}

@pytest.mark.roofline
def test_a(roofline, teardown_exit):
{body}    roofline.declare(flops=1e8).measure(step)


@pytest.mark.roofline
def test_b(roofline):
    roofline.declare(flops=1e8 * REPEAT).measure(step)
"""


def no_internal_traceback(result: pytest.RunResult) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "ChannelClosed" not in text and not re.search(r"pytest_roofline/\S+\.py:\d+", text), text


def regressed_ratio(path: Path, result: pytest.RunResult) -> float:
    """The time ratio of the one test of the A/B session in ``path``, which failed it as regressed."""
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    record = results(path)["tests"][0]["compare"]
    assert record["verdict"] == "regressed"
    return float(record["changes"]["time"]["ratio"])


def two_tests(path: Path, teardown: str = "", body: str = "") -> None:
    (path / "test_perf.py").write_text(TWO_TESTS.format(teardown=teardown or "    pass", body=body))


@pytest.mark.parametrize("where", ["teardown", "body"])
def test_a_twin_that_dies_fails_every_later_test_with_its_exit_status(
        where: str, repo: Path, write_machine: Callable[..., Path],  # noqa: F811
        run_roofline: Callable[..., pytest.RunResult]) -> None:
    import os  # noqa: F401 - the planted test uses it

    if where == "teardown":  # REF's fixture kills the twin after test_a
        two_tests(repo, teardown="    import os; os._exit(3)")
    else:  # REF's test_a kills it before its call site
        two_tests(repo, body="    import os; os._exit(3)\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "REF: a twin that dies")
    two_tests(repo)
    commit(repo, 0.002, repeat=2)  # HEAD: test_b twice as slow
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD~1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["*roofline: not compared*twin (pid *) exited with status 3*"])
    no_internal_traceback(result)
    tests = {t["nodeid"]: t for t in results(repo)["tests"]}
    assert tests["test_perf.py::test_b"]["outcome"] == "failed"
    assert tests["test_perf.py::test_b"]["compare"]["verdict"] == "error"
    assert "status 3" in tests["test_perf.py::test_b"]["compare"]["explanation"]
    if where == "body":
        assert tests["test_perf.py::test_a"]["compare"]["verdict"] == "error"
    result.stdout.fnmatch_lines(["test_perf.py::test_b * error: not compared"])


def test_an_import_error_at_ref_is_not_compared_and_fails(
        repo: Path, write_machine: Callable[..., Path],  # noqa: F811
        run_roofline: Callable[..., pytest.RunResult]) -> None:
    (repo / "test_perf.py").write_text("import helper_missing\n" + TEST)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "REF: does not import")
    (repo / "test_perf.py").write_text(TEST)
    commit(repo, 0.002, repeat=3)
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD~1", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert '<property name="roofline_compare_verdict" value="error"' in (repo / "junit.xml").read_text()
    result.stdout.fnmatch_lines(["*roofline: not compared: REF HEAD~1 (*) could not collect test_perf.py:*",
                                 "*No module named 'helper_missing'*"])
    no_internal_traceback(result)
    record = results(repo)["tests"][0]["compare"]
    assert record["verdict"] == "error" and "helper_missing" in record["explanation"]


def test_new_is_said_with_its_evidence(repo: Path, write_machine: Callable[..., Path],  # noqa: F811
                                       run_roofline: Callable[..., pytest.RunResult]) -> None:
    (repo / "test_new.py").write_text(TEST.replace("test_step", "test_added"))
    (repo / "test_perf.py").write_text(TEST + TEST.replace("test_step", "test_more"))
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD")
    assert result.ret == 0, result.stdout.str()
    tests = {t["nodeid"]: t["compare"] for t in results(repo)["tests"]}
    assert tests["test_new.py::test_added"] == {"verdict": "new", "explanation":
                                                 "new: test_new.py does not exist at REF HEAD (" +
                                                 results(repo)["session"]["compare"]["commit"][:12] + ")"}
    assert tests["test_perf.py::test_more"]["verdict"] == "new"
    assert "test_perf.py was collected and has no such test" in tests["test_perf.py::test_more"]["explanation"]
    # the test both sides have is compared, not called new; a sleep on a shared host may leave it inconclusive
    assert tests["test_perf.py::test_step"]["verdict"] in ("steady", "inconclusive")


def test_code_in_a_submodule_is_compared_at_the_commit_ref_pins(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, write_machine: Callable[..., Path],
        run_roofline: Callable[..., pytest.RunResult]) -> None:
    path = pytester.path
    monkeypatch.setenv("PYTEST_ROOFLINE_CACHE", str(path.parent / f"{path.name}-cache"))
    library = path.parent / f"{path.name}-lib"
    library.mkdir()
    (library / "mypkg.py").write_text(CODE.format(delay=0.002, repeat=1))
    git(library, "init", "-q")
    git(library, "add", "-A")
    git(library, "commit", "-qm", "fast")
    machine = write_machine(MACHINE)
    (path / "test_perf.py").write_text(TEST)
    (path / "pytest.ini").write_text("[pytest]\npythonpath = lib\n")
    (path / ".gitignore").write_text(".roofline/\n__pycache__/\nmachine.json\n")
    git(path, "init", "-q")
    git(path, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    (library / "mypkg.py").write_text(CODE.format(delay=0.002, repeat=3))  # the bump: three times the work
    git(library, "commit", "-qam", "slow")
    git(path / "lib", "pull", "-q", "origin", "HEAD")
    git(path, "commit", "-qam", "bump the submodule")
    result = run_roofline(machine, "--roofline-compare", "HEAD~1")
    assert regressed_ratio(path, result) > 2.0  # three sleeps for one; wide: sleeps overshoot on a busy host


def test_addopts_n_in_the_project_and_n0_here(repo: Path, write_machine: Callable[..., Path],  # noqa: F811
                                              run_roofline: Callable[..., pytest.RunResult]) -> None:
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\naddopts = -n 2\n")
    git(repo, "commit", "-qam", "REF: xdist in addopts")
    commit(repo, 0.002, repeat=2)
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD~1", "-n", "0")
    assert regressed_ratio(repo, result) > 1.5  # two sleeps for one; wide: sleeps overshoot on a busy host


def test_an_absolute_test_path_runs_refs_copy(repo: Path, write_machine: Callable[..., Path],  # noqa: F811
                                              run_roofline: Callable[..., pytest.RunResult]) -> None:
    commit(repo, 0.002, repeat=2)
    machine = write_machine(MACHINE)
    result = run_roofline(machine, "--roofline-compare", "HEAD~1", str(repo / "test_perf.py"))
    assert regressed_ratio(repo, result) > 1.5  # REF's copy ran: not ×1.00
    outside = repo.parent / f"{repo.name}-elsewhere.py"
    outside.write_text(TEST)
    result = run_roofline(machine, "--roofline-compare=HEAD~1", str(outside))  # "=": the path alone is outside
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--roofline-compare: *elsewhere.py* is outside the repository at *"])


def test_the_worktree_is_never_collected_by_a_later_plain_run(
        repo: Path, write_machine: Callable[..., Path], pytester: pytest.Pytester,  # noqa: F811
        run_roofline: Callable[..., pytest.RunResult]) -> None:
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD", "--roofline-dir", "rl")
    assert result.ret == 0, result.stdout.str()
    assert list(repo.rglob("test_perf.py")) == [repo / "test_perf.py"]  # no copy of REF inside the repository
    plain = pytester.runpytest("-p", "no:cacheprovider")
    assert plain.ret == 0, plain.stdout.str()
    plain.assert_outcomes(passed=1)


def test_two_sessions_get_two_worktrees_and_a_stale_one_is_recreated(repo: Path) -> None:  # noqa: F811
    from pytest_roofline.ab.worktree import prepare

    commit(repo, 0.002, repeat=2)
    first = prepare("HEAD~1", repo)
    second = prepare("HEAD", repo)  # while the first session holds its worktree
    try:
        assert first.path != second.path and second.path.name == "worktree-1"
        assert "REPEAT = 1" in (first.path / "mypkg.py").read_text()
        assert "REPEAT = 2" in (second.path / "mypkg.py").read_text()
        assert repo not in first.path.parents
    finally:
        second.release()
    first.release()
    again = prepare("HEAD", repo)  # both free: the first slot again, moved to HEAD
    assert again.path == first.path and "REPEAT = 2" in (again.path / "mypkg.py").read_text()
    again.release()
    # stale: git forgot the worktree (its admin folder removed) but the folder is still there
    subprocess.run(["rm", "-rf", str(repo / ".git" / "worktrees")], check=True)
    (again.path / "leftover.txt").write_text("x")
    fresh = prepare("HEAD~1", repo)
    assert fresh.path == again.path and not (fresh.path / "leftover.txt").exists()
    assert "REPEAT = 1" in (fresh.path / "mypkg.py").read_text()
    fresh.release()


def test_bisect_skips_a_commit_that_cannot_run_and_shows_pytests_error(
        repo: Path, capsys: pytest.CaptureFixture[str], write_machine: Callable[..., Path],  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.commands import main

    machine = write_machine(MACHINE)
    (repo / "test_perf.py").write_text("import helper_missing\n" + TEST)
    git(repo, "commit", "-qam", "broken")  # HEAD~2: cannot run
    (repo / "test_perf.py").write_text(TEST)
    git(repo, "commit", "-qam", "fixed")  # HEAD~1: as fast as GOOD
    commit(repo, 0.002, repeat=2)  # HEAD: the slow one
    monkeypatch.chdir(repo)
    args = ["bisect", "HEAD~3", "HEAD", "--", f"--roofline-machine={machine}", "--roofline-max-time=0.05"]
    code = main(args)
    out = capsys.readouterr().out
    slow = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.strip()
    assert code == 0, out
    assert "skipped: the step at" in out and "No module named 'helper_missing'" in out
    assert f"first slow commit: {slow} change" in out
    code = main(["bisect", "--skip", "HEAD~2", *args[1:]])
    out = capsys.readouterr().out
    assert code == 0 and "skipped: --skip" in out and "helper_missing" not in out, out
    assert f"first slow commit: {slow} change" in out


def test_a_moved_repository_gets_a_worktree_of_its_own_and_the_old_one_goes(repo: Path) -> None:  # noqa: F811
    import shutil

    from pytest_roofline.ab.worktree import prepare

    first = prepare("HEAD", repo)
    first.release()
    moved = repo.parent / f"{repo.name}-moved"
    shutil.move(str(repo), str(moved))
    try:
        again = prepare("HEAD", moved)  # the old worktree's link points at the old place: not reused
        again.release()
        assert again.path != first.path and (again.path / "mypkg.py").is_file()
        assert not first.path.exists()  # its repository's git dir is gone: removed as an orphan
    finally:
        shutil.move(str(moved), str(repo))


def test_a_session_beside_another_compares_in_a_worktree_of_its_own(
        repo: Path, write_machine: Callable[..., Path],  # noqa: F811
        run_roofline: Callable[..., pytest.RunResult]) -> None:
    from pytest_roofline.ab.worktree import prepare

    commit(repo, 0.002, repeat=2)
    other = prepare("HEAD", repo)  # another compare session, its twin running at HEAD
    try:
        result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD~1")
        assert "REPEAT = 2" in (other.path / "mypkg.py").read_text()  # its checkout was left alone
    finally:
        other.release()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    document = results(repo)
    assert document["session"]["compare"]["worktree"].endswith("worktree-1")
    record = document["tests"][0]["compare"]
    assert record["verdict"] == "regressed" and record["changes"]["time"]["ratio"] > 1.5
