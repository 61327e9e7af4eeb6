"""Gate sensitivity: which injected slowdowns a fraction threshold catches, and how often it cries wolf.

Runs fresh ``pytest --roofline`` sessions of the held-out workloads with a known slowdown injected into every
measured call (a busy wait of that share of the call's own time; see benchmarks/heldout/conftest.py), the
slowdowns interleaved session by session so that host drift hits all of them alike. Each test's threshold is
``--threshold`` (0.9) x its median fraction over the clean sessions; printed per test and slowdown: the share
of sessions below it (at 0 %: false alarms, target 0; at 10 %: target >= 95 %).

    python benchmarks/gate_sensitivity.py [--sessions 6] [--slowdowns 0 5 10 20] [pytest args]

``--gate``: the plugin's own gate decides instead. Clean sessions first set each test's threshold (the first
``--threshold`` x its median, given to the tests through ``ROOFLINE_MIN_FRACTIONS``, see
benchmarks/heldout/conftest.py); then sessions with every slowdown, under ``--roofline-confirm on`` and
``off`` alternately, count the tests that failed.

``--history-thresholds``: the plugin's gate decides with the thresholds ``python -m pytest_roofline thresholds``
suggests: ``--history-sessions`` clean sessions build a history, each test gets its suggested ``min_fraction``
(``history/suggested_thresholds.py``), then ``--sessions`` sessions with every slowdown run under the default
``--roofline-confirm on``; printed per test: its suggestion, the sessions' spread, the slowdown the suggestion
should catch, and the share of runs failed at each slowdown (at 0 %: false alarms).

``--baseline``: the baseline gate decides, each session at a new commit of a throwaway repository holding
copies of the test folders (a commit's own sessions are never its baseline). ``--history-sessions`` (5) clean
sessions build a history; then
``--sessions`` sessions with every slowdown, interleaved, run against it (``--roofline-baseline``, default
``--roofline-max-drop``, writing no history of their own) and count, per slowdown, the tests failed as
regressed (at 0 %: false alarms) and those whose drop was beyond max_drop but not significant (noisy).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import git, measured_tests, require, roofline_session

HELDOUT = str(Path(__file__).parent / "heldout")


def run_session(directory: Path, slowdown: float, pytest_args: list[str],
                thresholds: dict[str, float] | None = None, key: str = "fraction",
                cwd: Path | None = None) -> dict[str, Any]:
    """``key`` of each measured test (a field of its results.json record; ``record``: the whole record)."""
    env = {"ROOFLINE_INJECT_SLOWDOWN": str(slowdown), "ROOFLINE_MIN_FRACTIONS": json.dumps(thresholds or {})}
    document = roofline_session(directory, pytest_args, env=env, cwd=cwd).document
    tests = measured_tests(document).values()
    return {t["nodeid"].split("::")[-1]: t if key == "record" else t[key] for t in tests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--slowdowns", type=float, nargs="+", default=[0, 5, 10, 20], help="percent")
    parser.add_argument("--threshold", type=float, nargs="+", default=[0.9, 0.92, 0.95],
                        help="x the clean median fraction; several: one table each (a slowdown of s %% of the "
                             "time lowers the fraction to 1/(1+s) of it: 10 %% -> 0.909, so 0.9 catches it "
                             "only through noise)")
    parser.add_argument("--gate", action="store_true",
                        help="let the plugin's gate decide, --roofline-confirm on and off side by side")
    parser.add_argument("--baseline", action="store_true",
                        help="let the baseline gate decide, against a history of clean sessions")
    parser.add_argument("--history-thresholds", action="store_true",
                        help="let the plugin's gate decide with the thresholds the history suggests")
    parser.add_argument("--history-sessions", type=int, default=5,
                        help="clean sessions in the history (--baseline, --history-thresholds)")
    args, pytest_args = parser.parse_known_args()
    pytest_args = pytest_args or [HELDOUT]
    if args.baseline:
        baseline_mode(args, pytest_args)
        return
    if args.gate:
        gate_mode(args, pytest_args)
        return
    if args.history_thresholds:
        history_thresholds_mode(args, pytest_args)
        return
    if 0 not in args.slowdowns:
        parser.error("--slowdowns must include 0: the clean sessions set the thresholds")
    fractions: dict[float, dict[str, list[float]]] = {s: {} for s in args.slowdowns}
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.sessions):
            for slowdown in args.slowdowns:
                found = run_session(Path(tmp) / f"{slowdown}-{index}", slowdown / 100, pytest_args)
                for name, fraction in found.items():
                    fractions[slowdown].setdefault(name, []).append(fraction)
            print(f"session {index + 1}/{args.sessions} done", file=sys.stderr)
    require(len(fractions[0]), "no clean session measured a fraction")
    for threshold in args.threshold:
        print_table(fractions, args.slowdowns, threshold, args.sessions)


def gate_mode(args: argparse.Namespace, pytest_args: list[str]) -> None:
    factor = args.threshold[0]
    with tempfile.TemporaryDirectory() as tmp:
        clean: dict[str, list[float]] = {}
        for index in range(args.sessions):
            for name, fraction in run_session(Path(tmp) / f"clean-{index}", 0.0, pytest_args).items():
                clean.setdefault(name, []).append(fraction)
        require(len(clean), "no clean session measured a fraction")
        thresholds = {name: factor * statistics.median(values) for name, values in clean.items()}
        print(f"thresholds ({factor:g} x the median of {args.sessions} clean sessions): "
              + ", ".join(f"{n} {t:.3f}" for n, t in sorted(thresholds.items())), file=sys.stderr)
        failed: dict[tuple[str, float], list[bool]] = {}
        for index in range(args.sessions):
            for slowdown in args.slowdowns:
                for confirm in ("on", "off"):
                    outcomes = run_session(Path(tmp) / f"{confirm}-{slowdown}-{index}", slowdown / 100,
                                           [*pytest_args, "--roofline-confirm", confirm], thresholds, "outcome")
                    failed.setdefault((confirm, slowdown), []).extend(o == "failed" for o in outcomes.values())
            print(f"gated session {index + 1}/{args.sessions} done", file=sys.stderr)
    print(f"share of tests failed by the gate (threshold {factor:g} x clean median, {args.sessions} sessions "
          "per slowdown and mode):")
    print(f"{'confirm':8s} " + " ".join(f"{f'{s:g}%':>7s}" for s in args.slowdowns))
    for confirm in ("on", "off"):
        print(f"{confirm:8s} " + " ".join(f"{statistics.fmean(failed[(confirm, s)]):7.0%}" for s in args.slowdowns))


def history_thresholds_mode(args: argparse.Namespace, pytest_args: list[str]) -> None:
    from pytest_roofline.history.reader import load
    from pytest_roofline.history.suggested_thresholds import advise

    with tempfile.TemporaryDirectory() as tmp:
        history = Path(tmp) / "history"
        for index in range(args.history_sessions):
            run_session(Path(tmp) / f"clean-{index}", 0.0, [*pytest_args, "--roofline-history", str(history)])
        advice = {a.nodeid.split("::")[-1]: a for a in advise(load(history).sessions, last=args.history_sessions)}
        thresholds = {name: a.suggested for name, a in advice.items() if a.suggested is not None}
        require(len(thresholds), "the history suggested no threshold")
        print(f"history: {args.history_sessions} clean sessions; thresholds: "
              + ", ".join(f"{n} {t:.3f}" for n, t in sorted(thresholds.items())), file=sys.stderr)
        failed: dict[float, dict[str, list[bool]]] = {s: {} for s in args.slowdowns}
        for index in range(args.sessions):
            for slowdown in args.slowdowns:
                outcomes = run_session(Path(tmp) / f"{slowdown}-{index}", slowdown / 100,
                                       [*pytest_args, "--roofline-history", "none"], thresholds, "outcome")
                for name, outcome in outcomes.items():
                    failed[slowdown].setdefault(name, []).append(outcome == "failed")
            print(f"gated session {index + 1}/{args.sessions} done", file=sys.stderr)
    header = " ".join(f"{f'{s:g}%':>6s}" for s in args.slowdowns)
    print(f"\nthe gate with the suggested thresholds ({args.history_sessions} clean sessions, {args.sessions} "
          "sessions per slowdown): share of runs failed")
    print(f"{'test':28s} {'median':>7s} {'sd':>6s} {'min_frac':>8s} {'catches':>8s}  {header}")
    for name in sorted(thresholds):
        a = advice[name]
        shares = " ".join(f"{statistics.fmean(failed[s][name]):6.0%}" if failed[s].get(name) else f"{'-':>6s}"
                          for s in args.slowdowns)
        print(f"{name[-28:]:28s} {a.median:7.3f} {a.log_sd:6.1%} {thresholds[name]:8.3f} {a.catches or 0:8.0%}  "
              f"{shares}")
    for slowdown in args.slowdowns:
        runs = [f for name in thresholds for f in failed[slowdown].get(name, [])]
        print(f"{slowdown:g}%: {sum(runs) / (len(runs) or 1):.0%} of {len(runs)} test runs failed"
              + (" (false alarms)" if slowdown == 0 else ""))


class Commits:
    """A throwaway repository holding copies of the test folders, with a new commit before every session: the
    baseline gate never takes a commit's own sessions for its baseline, so sessions of one commit would each
    find an empty one and measure nothing."""

    def __init__(self, root: Path, pytest_args: list[str]) -> None:
        self.repo = root / "repo"
        self.repo.mkdir()
        self.args = []
        for arg in pytest_args:
            path = Path(arg)
            if not arg.startswith("-") and path.is_dir():
                shutil.copytree(path, self.repo / path.name, ignore=shutil.ignore_patterns("__pycache__"))
                arg = path.name
            self.args.append(arg)
        git(self.repo, "init", "-q", "-b", "main")
        self.count = 0

    def next(self) -> Path:
        self.count += 1
        git(self.repo, "commit", "-q", "--allow-empty", "-m", f"session {self.count}")
        return self.repo


def baseline_mode(args: argparse.Namespace, pytest_args: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        history = Path(tmp) / "history"
        commits = Commits(Path(tmp), pytest_args)
        pytest_args = commits.args
        for index in range(args.history_sessions):
            run_session(Path(tmp) / f"clean-{index}", 0.0, [*pytest_args, f"--roofline-history={history}"],
                        cwd=commits.next())
        print(f"history: {args.history_sessions} clean sessions", file=sys.stderr)
        # per slowdown and test: (baseline verdict, the test failed)
        seen: dict[float, dict[str, list[tuple[str, bool]]]] = {s: {} for s in args.slowdowns}
        on_time: dict[float, int] = dict.fromkeys(args.slowdowns, 0)  # regressions the time gate caught
        for index in range(args.sessions):
            for slowdown in args.slowdowns:
                records = run_session(Path(tmp) / f"{slowdown}-{index}", slowdown / 100,
                                      [*pytest_args, "--roofline-history=none", f"--roofline-baseline={history}"],
                                      key="record", cwd=commits.next())
                require(len(records), f"the session at {slowdown:g} % measured no test")
                for name, record in records.items():
                    verdict = (record.get("baseline") or {}).get("verdict", "none")
                    seen[slowdown].setdefault(name, []).append((verdict, record["outcome"] == "failed"))
                    on_time[slowdown] += "time" in ((record.get("baseline") or {}).get("failed_on") or [])
            print(f"baseline session {index + 1}/{args.sessions} done", file=sys.stderr)
    names = sorted({n for by_name in seen.values() for n in by_name})
    header = " ".join(f"{f'{s:g}%':>11s}" for s in args.slowdowns)
    given = [v for k, v in itertools.pairwise(pytest_args) if k == "--roofline-max-drop"]
    drop = f"max_drop {given[-1]}" if given else "default max_drop"
    print(f"\nbaseline gate, {drop}: per test and slowdown, failed / regressed / noisy / runs "
          f"(regressed but not failed: a contended measurement, reported), {args.history_sessions} clean "
          f"sessions in the history, {args.sessions} sessions per slowdown")
    print(f"{'test':28s} {header}")
    for name in names:
        cells = []
        for slowdown in args.slowdowns:
            runs = seen[slowdown].get(name, [])
            cells.append(f"{sum(f for _, f in runs)}/{sum(v == 'regressed' for v, _ in runs)}/"
                         f"{sum(v == 'noisy' for v, _ in runs)}/{len(runs)}".rjust(11))
        print(f"{name[-28:]:28s} {' '.join(cells)}")
    for slowdown in args.slowdowns:
        runs = [run for by_name in seen[slowdown].values() for run in by_name]
        count = len(runs) or 1
        print(f"{slowdown:g}%: {sum(f for _, f in runs) / count:.0%} failed, "
              f"{sum(v == 'regressed' for v, _ in runs) / count:.0%} regressed, "
              f"{sum(v == 'noisy' for v, _ in runs) / count:.0%} noisy of {len(runs)} test runs; "
              f"{on_time[slowdown] / count:.0%} regressed on time"
              + (" (at 0 %: false alarms)" if slowdown == 0 else ""))


def print_table(fractions: dict[float, dict[str, list[float]]], slowdowns: list[float], factor: float,
                sessions: int) -> None:
    names = sorted(fractions[0])
    header = " ".join(f"{f'{s:g}%':>7s}" for s in slowdowns)
    print(f"\n{'test':28s} {'clean':>7s} {'CV':>6s} {'worst':>6s}  flagged at {header}")
    caught: dict[float, list[float]] = {s: [] for s in slowdowns}
    for name in names:
        clean = fractions[0][name]
        median = statistics.median(clean)
        threshold = factor * median
        cv = statistics.stdev(clean) / statistics.fmean(clean) if len(clean) > 1 else 0.0
        shares = []
        for slowdown in slowdowns:
            values = fractions[slowdown].get(name, [])
            share = sum(v < threshold for v in values) / len(values) if values else float("nan")
            caught[slowdown].append(share)
            shares.append(f"{share:7.0%}")
        print(f"{name[-28:]:28s} {median:7.3f} {cv:6.1%} {min(clean) / median:6.3f}  {'':10s} {' '.join(shares)}")
    print(f"threshold {factor:g} x clean median, {sessions} sessions per slowdown; all tests: "
          + ", ".join(f"{s:g}% flagged in {statistics.fmean(caught[s]):.0%}" for s in slowdowns))


if __name__ == "__main__":
    main()
