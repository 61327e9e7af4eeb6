"""``pytest-roofline bisect GOOD BAD [-- PYTEST_ARGS]``: the first commit between GOOD and BAD whose tests are
slower than at GOOD, by ``--roofline-compare GOOD`` at each step (the A/B gate: lockstep with GOOD's twin).

Each step checks the commit out in a worktree of its own (``bisect``, beside REF's: see :mod:`.worktree`) and runs
pytest there with this pytest-roofline (the measuring code stays the same at every step; only the code under test
moves). A step is slow when the gate failed a test as slower than GOOD.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_roofline._safe_text import printable
from pytest_roofline.ab.twin import PACKAGE_DIR, TWIN_BOOT
from pytest_roofline.ab.worktree import Checkout, git, prepare, resolve
from pytest_roofline.errors import CompareError, StepCannotRun
from pytest_roofline.record.ab_record import ABRecord


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("good", help="a revision whose tests are fast (the base every step is compared with)")
    parser.add_argument("bad", help="a later revision whose tests are slower")
    parser.add_argument("pytest_args", nargs="*", help="pytest's arguments after --, e.g. -- tests -k conv")
    parser.add_argument("--roofline-dir", default=".roofline",
                        help=("kept for old command lines; the worktrees live outside the repository, under the "
                              "characterization cache ($PYTEST_ROOFLINE_CACHE)"))
    parser.add_argument("--python", default=None, help="the interpreter each step runs under (default: this one)")
    parser.add_argument("--skip", action="append", default=[], metavar="REV",
                        help=("a revision not to test (it cannot run: a broken build, an import error); repeatable. A "
                              "step whose pytest run writes no results is skipped too, with pytest's own error shown"))


@dataclass(frozen=True)
class Step:
    commit: str
    slow: bool
    # (test, ratio, interval) of each test failed as slower
    regressed: list[tuple[str, float, Sequence[float] | None]]
    exit_code: int
    skipped: str | None = None  # why this commit was not tested (then slow is meaningless)


@dataclass(frozen=True)
class Found:
    """The first slow commit, or (when skipped commits hide it) the range it lies in."""

    step: Step
    candidates: list[str]  # more than one: the first slow commit is one of these (skipped ones between)


def run_step(commit: str, good: str, where: Path, roofline_dir: Path, pytest_args: list[str],
             python: str | None) -> Step:
    """Check ``commit`` out and run the A/B gate there against ``good``."""
    checkout = prepare(commit, where, roofline_dir, name="bisect")
    try:
        return _run_in(checkout, commit, good, pytest_args, python)
    finally:
        checkout.release()


def _run_in(checkout: Checkout, commit: str, good: str, pytest_args: list[str], python: str | None) -> Step:
    boot, package = str(TWIN_BOOT), str(PACKAGE_DIR)
    with tempfile.TemporaryDirectory(prefix="roofline-bisect-") as out:
        command = [python or sys.executable, boot, package, "1", "--", *pytest_args, "--roofline",
                   f"--roofline-compare={good}", f"--roofline-dir={out}", "--roofline-history=none", "-q",
                   "-p", "no:cacheprovider"]
        done = subprocess.run(command, cwd=checkout.cwd, capture_output=True, text=True, check=False)
        try:
            tests = json.loads((Path(out) / "results.json").read_text())["tests"]
        except (OSError, ValueError, KeyError):
            said = [*done.stdout.splitlines()[-15:], *done.stderr.splitlines()[-10:]]
            raise StepCannotRun(f"the step at {commit[:12]} wrote no results (pytest exit {done.returncode}); "
                                "pytest said:\n" + "\n".join(f"    {printable(line)}" for line in said)) from None
    regressed: list[tuple[str, float, Sequence[float] | None]] = []
    for test in tests:
        record = ABRecord.from_dict(test.get("compare") or {})
        if record.verdict == "regressed" and record.time is not None and record.time.ratio is not None:
            regressed.append((test["nodeid"], record.time.ratio, record.time.ci))
    return Step(commit, bool(regressed), regressed, done.returncode)


def describe(step: Step) -> str:
    if step.skipped is not None:
        return f"{step.commit[:12]}: skipped: {step.skipped}"
    if not step.regressed:
        return f"{step.commit[:12]}: not slower"
    worst = max(step.regressed, key=lambda r: r[1])
    interval = f" [{worst[2][0]:.3f}, {worst[2][1]:.3f}]" if worst[2] else ""
    return (f"{step.commit[:12]}: slower: {len(step.regressed)} test(s), worst {worst[0]} time ×{worst[1]:.3f}"
            f"{interval}")


def bisect(good: str, bad: str, where: Path, roofline_dir: Path, pytest_args: list[str],
           python: str | None = None, say: Callable[[str], None] = print,
           skip: list[str] | None = None) -> Found | None:
    """The first slow commit after GOOD up to BAD (None when BAD is not slower than GOOD). A commit in ``skip``
    or whose step cannot run is skipped (said); when skipped commits hide the answer, the range is returned."""
    top, good_commit = resolve(good, where)
    _, bad_commit = resolve(bad, where)
    skipped = {resolve(rev, where)[1] for rev in skip or []}
    commits = git(["rev-list", "--reverse", "--ancestry-path", f"{good_commit}..{bad_commit}"], top).split()
    if not commits:
        raise CompareError(f"bisect: no commits between {good} and {bad} ({bad} must descend from {good})")
    say(f"bisect: {len(commits)} commit(s) after {good} ({good_commit[:12]}) up to {bad} ({bad_commit[:12]}); "
        f"each compared with {good} in lockstep")

    def step(index: int) -> Step:
        commit = commits[index]
        if commit in skipped:
            result = Step(commit, False, [], 0, "--skip")
        else:
            try:
                result = run_step(commit, good_commit, where, roofline_dir, pytest_args, python)
            except StepCannotRun as exc:
                result = Step(commit, False, [], 0, str(exc))
        say(f"  {describe(result)}")
        return result

    last = step(len(commits) - 1)
    if last.skipped is not None:
        raise CompareError(f"bisect: {bad} ({bad_commit[:12]}) cannot be tested, so nothing is known to be slow: "
                           f"{last.skipped}")
    if not last.slow:
        return None
    lo, hi, found = -1, len(commits) - 1, last  # commits[lo] fast (GOOD itself at -1), commits[hi] slow
    untestable: set[int] = set()
    while True:
        open_ = [i for i in range(lo + 1, hi) if i not in untestable]
        if not open_:
            break
        middle = (lo + hi) / 2
        index = min(open_, key=lambda i: (abs(i - middle), i))  # the middle, or the nearest testable commit
        result = step(index)
        if result.skipped is not None:
            untestable.add(index)
        elif result.slow:
            hi, found = index, result
        else:
            lo = index
    return Found(found, commits[lo + 1:hi + 1])


def run(args: argparse.Namespace) -> int:
    where = Path.cwd()
    try:
        found = bisect(args.good, args.bad, where, Path(args.roofline_dir), list(args.pytest_args), args.python,
                       skip=list(args.skip))
    except CompareError as exc:
        print(printable(str(exc)), file=sys.stderr)
        return 2
    if found is None:
        print(f"bisect: {printable(args.bad)} is not slower than {printable(args.good)}: nothing to find")
        return 1
    if len(found.candidates) > 1:
        print(f"bisect: skipped commits hide the first slow commit; it is one of {len(found.candidates)}:")
        for commit in found.candidates:
            print(f"  {commit} {printable(git(['log', '-1', '--format=%s', commit], where))}")
        return 0
    subject = git(["log", "-1", "--format=%s", found.step.commit], where)
    print(f"first slow commit: {found.step.commit} {printable(subject)}")
    for nodeid, ratio, interval in found.step.regressed:
        span = f", 95% CI [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else ""
        print(f"  {printable(nodeid)}: time ×{ratio:.3f} against {printable(args.good)}{span}")
    return 0
