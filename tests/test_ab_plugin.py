"""``--roofline-compare REF`` through pytest: a git repository made by the test, REF's twin started for real.

The measured call sleeps (declared work), so its time is set by the code, not by the host: twice the sleep is
twice the time at every moment, and the same sleep is the same time.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot  # noqa: F401 - imported once, before pytester's in-process runs (see test_plugin_history)
import numpy  # noqa: F401
import pytest

from pytest_roofline.ab.twin import OMP_WAIT_VARIABLES

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


def committed_repo(path: Path, files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """``files`` (name -> text) committed as the first commit of a repository at ``path``, with a pytest.ini
    that puts its top on the path; REF's worktrees go under a cache of its own."""
    monkeypatch.setenv("PYTEST_ROOFLINE_CACHE", str(path.parent / f"{path.name}-cache"))
    for name, text in {**files, "pytest.ini": "[pytest]\npythonpath = .\n",
                       ".gitignore": ".roofline/\n__pycache__/\nmachine.json\n"}.items():
        (path / name).write_text(text)
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    return path


@pytest.fixture
def repo(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository whose first commit sleeps 2 ms per call."""
    return committed_repo(pytester.path, {"mypkg.py": CODE.format(delay=0.002, repeat=1), "test_perf.py": TEST},
                          monkeypatch)


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
        "roofline: A/B regression: time ×[12].* against HEAD~1 (*): work ×2.00 at the same*",
        "  time per call 4.* ms here, 2.* ms at HEAD~1; paired ratio [12].*, 95% CI [[]*], 99.99% CI [[]*]*",
        "* process pairs (*",
        "  fails on: time rose more than max_slowdown [23]% (auto: its process pairs * 2.5%)",
        "*compare: against HEAD~1 (*), each call site in pairs of processes*",
        "test_perf.py::test_step *regressed *",
    ])
    result.stdout.fnmatch_lines([
        "  .roofline/sessions/*/test_perf.py__test_step-*.png",
    ])
    record = results(repo)["tests"][0]["compare"]
    assert record["verdict"] == "regressed" and record["failed_on"] == ["time"]
    assert record["changes"]["time"]["ratio"] > 1.5  # twice the sleeps; how far above 2 a loaded host says varies
    assert record["changes"]["work"]["ratio"] == 2.0 and record["ref_outcome"] == "passed"
    assert results(repo)["session"]["compare"]["ref"] == "HEAD~1"
    # the top level: the process pairs that decided the slowdown at 99.99 % (three where they agree within a
    # fraction of a percent: their claim interval spans 95 times their spread), each with its own ratio near 2
    pairs = record["process_pairs"]
    assert 3 <= pairs < 12 and len(record["pair_ratios"]) == pairs
    # decided by them: no later pair was started
    logs = sorted(p.name for p in (repo / ".roofline" / "sessions").glob("*/compare/twin-*.log"))
    assert logs == sorted(f"twin-{side}-{n}.log" for side in ("ref", "this") for n in range(pairs)), logs
    assert all(1.6 < r < 2.4 for r in record["pair_ratios"])
    assert record["between_cv"] >= 0 and record["interval"] == "t over process pairs"
    region = results(repo)["tests"][0]["regions"][0]["compare"]
    firsts = [w["alloc_first"] for w in region["within"]]
    assert all(a != b for a, b in itertools.pairwise(firsts)) and len(firsts) == pairs  # alternated between pairs
    assert all(w["rewarm"] for w in region["within"])  # roofs without cache sizes: the untimed call stays
    # the default band is auto: the one the call site's pairs were judged with, by their spread
    assert record["auto_band"] is True and record["max_slowdown"] == region["max_slowdown"]
    assert region["max_slowdown"] == (0.02 if region["between_cv"] <= 0.02 else 0.03)


def test_a_commit_that_changes_only_the_readme_passes(
        repo: Path, write_machine: Callable[..., Path], run_roofline: Callable[..., pytest.RunResult],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a session fixture's teardown, here and in this checkout's twins (REF has no conftest): a twin leaves
    # quickly at the end (os._exit), but only after pytest tore its session fixtures down
    teardowns = repo.parent / f"{repo.name}-teardowns.txt"
    monkeypatch.setenv("ROOFLINE_TEST_TEARDOWNS", str(teardowns))
    (repo / "conftest.py").write_text(
        "import os, pytest\n\n@pytest.fixture(scope='session', autouse=True)\ndef marks_its_teardown():\n"
        "    yield\n    with open(os.environ['ROOFLINE_TEST_TEARDOWNS'], 'a') as out:\n"
        "        out.write(f'{os.getpid()} {os.getppid()} {os.environ.get(\"OMP_WAIT_POLICY\", \"-\")}\\n')\n")
    commit(repo, 0.002, readme="docs only\n")
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD~1")
    assert result.ret == 0, result.stdout.str()
    record = results(repo)["tests"][0]["compare"]
    # steady, or inconclusive when the sleeps' process pairs spread past the band on a loaded host: never a
    # verdict on time
    assert record["verdict"] in ("steady", "inconclusive"), record
    if record["verdict"] == "inconclusive":
        # below four pairs the 95 % interval, from four the 90 % one that "unchanged" needs
        assert re.search(r"inconclusive: the (90% )?interval \[", record["explanation"]), record
    pairs = record.get("process_pairs") or 5
    ended = [line.split() for line in teardowns.read_text().splitlines()]
    assert len({pid for pid, _, _ in ended}) == 1 + pairs  # this session and each pair's twin of this side
    # the twins' OpenMP threads wait passively (the other side's spin would run on the cores of their turns);
    # this session's own environment is left as it was
    if not any(name in os.environ for name in OMP_WAIT_VARIABLES):
        assert {policy for pid, _, policy in ended if int(pid) != os.getpid()} == {"PASSIVE"}
        assert [policy for pid, _, policy in ended if int(pid) == os.getpid()] == ["-"]
    # every twin a new interpreter started by this session: its own address-space layout, no zygote's
    assert {int(parent) for pid, parent, _ in ended if int(pid) != os.getpid()} == {os.getpid()}
    assert not list((repo / ".roofline" / "sessions").glob("*/compare/zygote.log"))
    if record["verdict"] == "steady":  # the interval over the pairs lies inside the +-3 % band
        assert record["changes"]["time"]["ratio"] == pytest.approx(1.0, abs=0.03)
    assert record["changes"]["work"]["verdict"] == "same"


def test_a_fraction_past_its_cached_roof_warns_in_an_a_b_session_and_the_a_b_verdict_stands(
        repo: Path, write_machine: Callable[..., Path], run_roofline: Callable[..., pytest.RunResult]) -> None:
    """1e8 FLOP in a 2 ms sleep is 5e10 FLOP/s against a pinned 1e10 roof: fraction about 5. A plain session
    errors (the roof is wrong); an A/B session, which has no live probe, still compares the times and says so
    (on the 2-core VM a 1-core DRAM roof made 4 A/B comparisons of `x*2+y` errors with no verdict)."""
    commit(repo, 0.002, readme="docs only\n")
    low = write_machine({"name": "low-roof", "peak_flops": {"fp32": 1e10}, "bandwidth": {"DRAM": 10e9}})
    plain = run_roofline(low)
    assert plain.ret != 0 and "the roof is wrong" in plain.stdout.str()
    assert results(repo)["tests"][0]["outcome"] == "error"
    # a docs-only commit reaches no test: --roofline-compare-all pairs it all the same
    result = run_roofline(low, "--roofline-compare", "HEAD~1", "--roofline-compare-all")
    assert result.ret == 0, result.stdout.str()
    test = results(repo)["tests"][0]
    assert test["outcome"] == "passed" and "the roof is wrong" in test["roof_warning"]
    assert test["compare"]["verdict"] in ("steady", "inconclusive"), test["compare"]
    assert test["compare"]["changes"]["time"]["ratio"] == pytest.approx(1.0, abs=0.1)
    assert "A/B verdict compares times and stands" in result.stdout.str()


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


def test_compare_refuses_the_ncu_counter_and_names_both_options(
        repo: Path, write_machine: Callable[..., Path], run_roofline: Callable[..., pytest.RunResult]) -> None:
    # On the H100 (auto -> ncu) a compare session timed nothing in pairs and read every test "new (not in REF)"
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD", "--roofline-counter", "ncu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([("*--roofline-counter ncu does not combine with --roofline-compare*"
                                  "--roofline-counter analytic*")])


def test_bisect_finds_the_commit_that_made_the_step_slow(repo: Path, capsys: pytest.CaptureFixture[str],
                                                          write_machine: Callable[..., Path],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.commands import main

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


TWO_SITES = """
import time
import pytest

DOUBLE = {double}


def slow():
    for _ in range(2 if DOUBLE else 1):
        time.sleep(0.002)


def same():
    time.sleep(0.002)


@pytest.mark.roofline(max_slowdown=0.0001)
def test_two_sites(roofline):
    roofline.declare(flops=1e8).measure(slow)
    roofline.declare(flops=1e8).measure(same)
"""


def two_commits(path: Path, base: str, change: str) -> None:
    """A repository whose test_two.py is ``base`` at HEAD~1 and ``change`` at HEAD."""
    (path / "test_two.py").write_text(base)
    (path / ".gitignore").write_text(".roofline/\n__pycache__/\nmachine.json\n")
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    (path / "test_two.py").write_text(change)
    git(path, "commit", "-qam", "change")


def test_a_fourth_pair_joins_only_where_three_did_not_decide(
        pytester: pytest.Pytester, write_machine: Callable[..., Path],
        run_roofline: Callable[..., pytest.RunResult]) -> None:
    # site 1 doubles its sleep (decided beyond the band by three pairs); site 2 is the same sleep on both sides,
    # which a band of +-0.01 % cannot decide: a fourth pair joins there, passing site 1 untimed
    path = pytester.path
    two_commits(path, TWO_SITES.format(double=False), TWO_SITES.format(double=True))
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD~1", "--roofline-compare-pairs", "4")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    first, second = (r["compare"] for r in results(path)["tests"][0]["regions"])
    # under a loaded host the sleeps' pairs spread widely; three pairs decide the doubling almost always
    assert first["process_pairs"] in (3, 4) and all(r > 1.2 for r in first["pair_ratios"]), first
    lo, hi = second["ci"]
    # the band of +-0.01 %: only an interval wholly beyond it (rare, by chance) decides with three pairs
    assert second["process_pairs"] == 4 or lo > 1.0001 or hi < 1 / 1.0001, second
    assert len(second["within"]) == second["process_pairs"]
    assert all(0.7 < r < 1.4 for r in second["pair_ratios"]), second
    record = results(path)["tests"][0]["compare"]
    if first["process_pairs"] != second["process_pairs"]:  # unequal pair counts: combined site by site
        assert "process_pairs" not in record and record["interval"] == "over process pairs, site by site"
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD~1", "--roofline-compare-pairs", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--roofline-compare-pairs / ini roofline_compare_pairs must be a whole number >= 3*"])


def test_a_call_site_refs_test_lacks_starts_no_further_pair(
        pytester: pytest.Pytester, write_machine: Callable[..., Path],
        run_roofline: Callable[..., pytest.RunResult]) -> None:
    # the first call site doubles its sleep (decided by three pairs, almost always); the second exists here
    # only: its band of +-0.01 % would call for more pairs, but no pair has the site on both sides, so none is
    # started for it and the site is not compared
    path = pytester.path
    one_site = TWO_SITES.format(double=False).replace("    roofline.declare(flops=1e8).measure(same)\n", "")
    two_commits(path, one_site, TWO_SITES.format(double=True))
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "HEAD~1", "--roofline-compare-pairs", "5")
    first, second = results(path)["tests"][0]["regions"]
    assert (second.get("compare") or {}).get("compared") is not True, result.stdout.str()
    logs = sorted(p.name for p in (path / ".roofline" / "sessions").glob("*/compare/twin-*.log"))
    expected = {f"twin-{side}-{n}.log" for side in ("ref", "this") for n in range(first["compare"]["process_pairs"])}
    assert set(logs) == expected, logs


def test_nightly_compare_last_falls_back_on_a_first_night_then_compares_with_the_last_nights_commit(
        repo: Path, write_machine: Callable[..., Path], run_roofline: Callable[..., pytest.RunResult],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    machine = write_machine(MACHINE)
    night = ("--roofline-compare", "last", "--roofline-history", "nightly")
    first = run_roofline(machine, *night)
    assert first.ret == 0, first.stdout.str()
    first.stdout.fnmatch_lines([("*roofline: --roofline-compare last: no A/B: nightly holds no session of machine "
                                "pinned-test-machine-* yet (a first night); the baseline gate judges against nightly")])
    first_commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                                  check=True).stdout.strip()
    commit(repo, 0.002, repeat=2)  # the next night runs each step twice
    second = run_roofline(machine, *night)
    assert second.ret == pytest.ExitCode.TESTS_FAILED, second.stdout.str()
    second.stdout.fnmatch_lines(["roofline: A/B regression: time ×[12].* against last (*): work ×2.00*"])
    session = results(repo)["session"]["compare"]
    assert session["ref"] == "last" and session["commit"] == first_commit
    record = results(repo)["tests"][0]["compare"]
    assert record["commit"] == first_commit and record["changes"]["time"]["ratio"] > 1.5
    # both nights may fall in one second, where the names sort by commit: pick the second night by its commit
    entries = [json.loads(p.read_text()) for p in (repo / "nightly").rglob("*.json")]
    (entry,) = [e for e in entries if e["session"]["git"]["commit"] != first_commit]
    assert entry["tests"][0]["compare"]["changes"]["time"]["ratio"] > 1.5  # the history keeps the night's ratio


def test_nightly_compare_last_whose_commit_is_not_fetched_says_so_and_judges_on_the_history(
        repo: Path, write_machine: Callable[..., Path], run_roofline: Callable[..., pytest.RunResult],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from test_plugin_history import fake_session

    from pytest_roofline.record.machine_key import machine_key

    monkeypatch.setenv("COLUMNS", "250")
    branch = subprocess.run(["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=repo, capture_output=True, text=True,
                            check=True).stdout.strip()
    for index in range(3):  # earlier nights on this branch whose commits this clone never fetched
        path = fake_session(repo / "nightly", index, 0.45, nodeid="test_perf.py::test_step",
                            key=machine_key(MACHINE), commit=f"{index + 1:x}" * 40)
        document = json.loads(path.read_text())
        document["session"]["git"]["branch"] = branch
        path.write_text(json.dumps(document))
    result = run_roofline(write_machine(MACHINE), "--roofline-compare", "last", "--roofline-history", "nightly")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([("*--roofline-compare last: no A/B: the last night's commit 333333333333 is not in "
                                 "this clone (fetch the branch's history*; the baseline gate judges against nightly"),
                                 "*baseline nightly: per test, its last 5 session(s)*"])
    assert results(repo)["tests"][0]["baseline"]["verdict"] in ("steady", "improved", "noisy")
