"""``--roofline-compare REF`` through pytest: a git repository made by the test, REF's twin started for real.

The measured call sleeps (declared work), so its time is set by the code, not by the host: twice the sleep is
twice the time at every moment, and the same sleep is the same time.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot  # noqa: F401 - imported once, before pytester's in-process runs (see test_plugin_history)
import numpy  # noqa: F401
import pytest

MACHINE = {"name": "pinned-test-machine", "peak_flops": {"fp32": 100e9}, "bandwidth": {"DRAM": 10e9}}

CODE = """
import time

DELAY = {delay}
REPEAT = {repeat}


def step():
    for _ in range(REPEAT):
        time.sleep(DELAY)
"""

TEST = """
import pytest
from mypkg import step, REPEAT

@pytest.mark.roofline
def test_step(roofline):
    roofline.declare(flops=1e8 * REPEAT).measure(step)
"""


def git(path: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=path, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin:/usr/local/bin"})


@pytest.fixture
def repo(pytester: pytest.Pytester) -> Path:
    """A repository whose first commit sleeps 2 ms per call."""
    path = pytester.path
    (path / "mypkg.py").write_text(CODE.format(delay=0.002, repeat=1))
    (path / "test_perf.py").write_text(TEST)
    (path / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (path / ".gitignore").write_text(".roofline/\n__pycache__/\nmachine.json\n")
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    return path


def commit(path: Path, delay: float, repeat: int = 1, readme: str | None = None) -> None:
    if readme is not None:
        (path / "README.md").write_text(readme)
    else:
        (path / "mypkg.py").write_text(CODE.format(delay=delay, repeat=repeat))
    git(path, "add", "-A")
    git(path, "commit", "-qm", "change")


def results(path: Path) -> dict:
    return json.loads((path / ".roofline" / "results.json").read_text())


def test_a_commit_that_runs_each_step_twice_fails_naming_the_base_and_the_ratio(
        repo: Path, write_machine: Callable[..., Path], run_roofline: Callable[..., pytest.RunResult]) -> None:
    commit(repo, 0.002, repeat=2)
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD~1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines([
        "roofline: slower than REF HEAD~1 (*): time ×[12].* against REF HEAD~1 (*): work ×2.00 at the same*",
        "  time per call 4.* ms here, 2.* ms at REF; paired ratio [12].*, 95% CI [[]*] over 3 process pairs (*",
        "*compare: against HEAD~1 (*), each call site in pairs of processes*",
        "test_perf.py::test_step *regressed *",
    ])
    result.stdout.fnmatch_lines([
        "  .roofline/sessions/*/test_perf.py__test_step-*.png",
    ])
    record = results(repo)["tests"][0]["compare"]
    assert record["verdict"] == "regressed" and record["failed_on"] == ["time"]
    assert record["changes"]["time"]["ratio"] == pytest.approx(2.0, rel=0.1)
    assert record["changes"]["work"]["ratio"] == 2.0 and record["ref_outcome"] == "passed"
    assert results(repo)["session"]["compare"]["ref"] == "HEAD~1"
    # the top level: three process pairs (the slowdown is decided by them), each with its own ratio near 2
    assert record["process_pairs"] == 3 and len(record["pair_ratios"]) == 3
    assert all(1.6 < r < 2.4 for r in record["pair_ratios"])
    assert record["between_cv"] >= 0 and record["interval"] == "t over process pairs"
    region = results(repo)["tests"][0]["regions"][0]["compare"]
    assert [w["alloc_first"] for w in region["within"]] == ["this", "ref", "this"] or \
        [w["alloc_first"] for w in region["within"]] == ["ref", "this", "ref"]  # alternated between pairs


def test_a_commit_that_changes_only_the_readme_passes(
        repo: Path, write_machine: Callable[..., Path], run_roofline: Callable[..., pytest.RunResult]) -> None:
    commit(repo, 0.002, readme="docs only\n")
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD~1")
    assert result.ret == 0, result.stdout.str()
    record = results(repo)["tests"][0]["compare"]
    assert record["verdict"] == "steady"
    assert record["changes"]["time"]["ratio"] == pytest.approx(1.0, abs=0.03)
    assert record["changes"]["work"]["verdict"] == "same"


def test_a_test_only_here_is_new_and_a_bad_ref_is_a_clear_error(
        repo: Path, write_machine: Callable[..., Path], run_roofline: Callable[..., pytest.RunResult]) -> None:
    (repo / "test_new.py").write_text(TEST.replace("test_step", "test_added"))
    machine = write_machine(MACHINE)
    result = run_roofline(machine, "--roofline-compare", "HEAD", "-k", "added")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["test_new.py::test_added * new (not in REF)"])
    result = run_roofline(machine, "--roofline-compare", "no-such-branch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--roofline-compare: 'no-such-branch' is not a commit of the repository at*"])


def test_compare_refuses_xdist(repo: Path, write_machine: Callable[..., Path],
                               run_roofline: Callable[..., pytest.RunResult]) -> None:
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--roofline-compare runs the tests serially*does not run under pytest-xdist*"])


def test_bisect_finds_the_commit_that_made_the_step_slow(repo: Path, capsys: pytest.CaptureFixture[str],
                                                          write_machine: Callable[..., Path],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.cli import main

    machine = write_machine(MACHINE)
    commit(repo, 0.002, readme="one\n")
    commit(repo, 0.002, repeat=2)  # the slow one: HEAD~1
    commit(repo, 0.002, readme="two\n")
    monkeypatch.chdir(repo)
    code = main(["bisect", "HEAD~3", "HEAD", "--", f"--roofline-machine={machine}", "--roofline-max-time=0.05"])
    out = capsys.readouterr().out
    slow = subprocess.run(["git", "rev-parse", "HEAD~1"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.strip()
    assert code == 0, out
    assert f"first slow commit: {slow} change" in out
    assert "test_perf.py::test_step: time ×" in out
