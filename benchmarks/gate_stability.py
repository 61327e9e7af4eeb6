"""Gate stability: coefficient of variation of each test's attained fraction over repeated sessions.

Target: CV <= 3 %. Each session is a fresh ``pytest --roofline`` process (machine characterization comes
from the cache, as in CI after the first run); fractions are read from each session's results.json.

    python benchmarks/gate_stability.py [--sessions 5] [pytest args, default: example_suite]

``--neighbours N`` starts N busy processes (a Python loop each, as another job on a shared runner would be)
beside every other session: quiet and loaded sessions alternate (``--sessions`` of each), and each test's
median fraction loaded ÷ quiet is printed, with the load by other processes (neither the session nor the
neighbours) that each session saw, from /proc/stat.

``--compare "ARGS" "ARGS" ...`` alternates sessions between sets of extra pytest arguments, side by side (for
example ``--compare "--roofline-min-time 0" ""``: the old timing against the default), each with its table.

``--checkouts DIR DIR`` alternates sessions between checkouts of the plugin (``git worktree add DIR COMMIT``),
each running its own ``example_suite`` and importing its own plugin: before and after, side by side.

``--cold`` gives every session an empty characterization cache (the compiled kernels are kept), as on a
fresh CI runner: the spread of the roofs between characterizations lands in the fractions.

Every session's test outcomes are counted and printed at the end (``outcomes quiet: 25 passed over 5
sessions``), each test that neither passed nor skipped with the cause its record keeps (``failure``), and a
session that wrote no results with the end of its output: an intermittent error is counted, not lost.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import measured_tests, require, roofline_session, start_neighbours, stop_neighbours


def run_session(directory: Path, pytest_args: list[str], cache: Path | None = None,
                checkout: Path | None = None) -> tuple[dict[str, dict], dict[str, str], list[str]]:
    """One session: its measured tests, every test's outcome, and what went wrong (a test that did not pass,
    with its recorded cause; a session that wrote no results, with the end of its output). ``checkout``:
    another checkout of pytest-roofline, run in its folder and imported from it."""
    env = {"PYTEST_ROOFLINE_CACHE": str(cache)} if cache is not None else {}
    session = roofline_session(directory, pytest_args, env=env, checkout=checkout, output=True)
    document = session.document
    if document is None:
        return {}, {}, [f"no results: {' | '.join(session.output.strip().splitlines()[-5:])}"]
    outcomes = {t["nodeid"]: str(t.get("outcome")) for t in document.get("tests", [])}
    wrong = [f"{t['nodeid']} {t.get('outcome')}: {(t.get('failure') or {}).get('message', 'no cause recorded')}"
             for t in document.get("tests", []) if t.get("outcome") not in ("passed", "skipped", "xfailed")]
    return measured_tests(document), outcomes, wrong


def busy_core_seconds() -> float:
    """Core-seconds all CPUs spent busy since boot (/proc/stat; 0 where it is missing)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0.0
    ticks = [int(v) for v in fields[:8]]
    idle = ticks[3] + ticks[4]
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cores_note(test: dict) -> str:
    """Which cores the test's regions ran on and whether any was contended (fields of the cores feature)."""
    used = sorted({c for r in test.get("regions", []) for c in (r.get("cores") or {}).get("used", [])})
    contended = any((r.get("cores") or {}).get("contended") for r in test.get("regions", []))
    return (f"cores {','.join(map(str, used))}" if used else "") + (" contended" if contended else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--neighbours", type=int, default=0,
                        help="busy processes beside every other session; prints loaded / quiet per test")
    parser.add_argument("--probe", choices=("live", "off"), nargs="+", default=None,
                        help="--roofline-probe for every session (default: the plugin's, live); two values: "
                             "sessions alternate between them, side by side, and each gets its table")
    parser.add_argument("--compare", nargs="+", default=None, metavar="ARGS",
                        help="sets of extra pytest arguments (one quoted string each, '' for none); sessions "
                             "alternate between them, side by side, and each gets its table")
    parser.add_argument("--checkouts", type=Path, nargs="+", default=None, metavar="DIR",
                        help="checkouts of pytest-roofline (a git worktree of each commit): sessions alternate "
                             "between them, each running its own example suite, one table each")
    parser.add_argument("--cold", action="store_true",
                        help="characterize afresh in every session (an empty cache, kernels kept)")
    args, pytest_args = parser.parse_known_args()
    pytest_args = pytest_args or ["example_suite"]
    extra: dict[str, list[str]] = {}
    if args.compare and (args.neighbours or args.probe):
        parser.error("--compare takes neither --neighbours nor --probe (put --roofline-probe in its ARGS)")
    if args.compare:
        kinds = [f"[{text}]" for text in args.compare]
        extra = {f"[{text}]": shlex.split(text) for text in args.compare}
    elif args.probe and len(args.probe) > 1 and not args.neighbours:
        kinds = [f"probe {mode}" for mode in args.probe]
        extra = {f"probe {mode}": ["--roofline-probe", mode] for mode in args.probe}
    else:
        if args.probe:
            pytest_args = [*pytest_args, "--roofline-probe", args.probe[0]]
        kinds = ["quiet", "loaded"] if args.neighbours else ["quiet"]
    checkouts = [c.resolve() for c in args.checkouts] if args.checkouts else [None]
    if args.checkouts:  # a kind per checkout and load: "DIR quiet", "DIR loaded"
        if args.compare or (args.probe and len(args.probe) > 1):
            parser.error("--checkouts takes neither --compare nor several --probe modes")
        kinds = [f"{c} {k}" for c in checkouts for k in kinds]
    fractions: dict[str, dict[str, list[float]]] = {kind: {} for kind in kinds}
    notes: dict[str, dict[str, set[str]]] = {kind: {} for kind in kinds}
    tally: dict[str, dict[str, int]] = {kind: {} for kind in kinds}  # test outcomes over the sessions
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.cold:  # compile once: a fresh runner compiles too, but that is not what varies
            home = Path(os.environ.get("PYTEST_ROOFLINE_CACHE", Path.home() / ".cache" / "pytest-roofline"))
            shutil.copytree(home / "build", Path(tmp) / "kernels") if (home / "build").is_dir() else (
                Path(tmp) / "kernels").mkdir()
        for index in range(args.sessions):
            for kind in kinds:
                neighbours = start_neighbours(args.neighbours) if kind.endswith("loaded") else []
                checkout = Path(kind.rsplit(" ", 1)[0]) if args.checkouts else None
                start, busy, ours = time.perf_counter(), busy_core_seconds(), children_cpu_seconds()
                try:
                    cache = None
                    if args.cold:
                        cache = Path(tmp) / f"cache-{kind}{index}"
                        shutil.copytree(Path(tmp) / "kernels", cache / "build", dirs_exist_ok=True)
                    tests, outcomes, wrong = run_session(Path(tmp) / f"kind{kinds.index(kind)}-{index}",
                                                         [*pytest_args, *extra.get(kind, [])], cache, checkout)
                finally:
                    wall = time.perf_counter() - start
                    stop_neighbours(neighbours)
                    mine = children_cpu_seconds() - ours  # the session and the neighbours (reaped above)
                other = max(0.0, busy_core_seconds() - busy - mine) / wall
                for outcome in [*outcomes.values(), *(["no results"] if not outcomes else [])]:
                    tally[kind][outcome] = tally[kind].get(outcome, 0) + 1
                problems += [f"session {index + 1} {kind}: {text}" for text in wrong]
                for text in wrong:
                    print(f"  {text}", file=sys.stderr)
                for nodeid, test in tests.items():
                    fractions[kind].setdefault(nodeid, []).append(test["fraction"])
                    notes[kind].setdefault(nodeid, set()).add(cores_note(test))
                print(f"session {index + 1}/{args.sessions} {kind}: {wall:.1f} s, other processes kept "
                      f"{other:.2f} cores busy", file=sys.stderr)
    require(sum(len(f) for f in fractions.values()), "no session measured a fraction")
    for kind in kinds:  # every session's outcomes, so an intermittent error is counted, not lost
        counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(tally[kind].items()))
        print(f"outcomes {kind}: {counts} over {args.sessions} {'cold ' if args.cold else ''}sessions")
    for text in problems:
        print(f"  {text}")
    if args.neighbours:
        for checkout in checkouts:
            prefix = "" if checkout is None else f"{checkout} "
            if checkout is not None:
                print(f"\n{checkout}:")
            print_loaded_table({k: fractions[prefix + k] for k in ("quiet", "loaded")},
                               {k: notes[prefix + k] for k in ("quiet", "loaded")}, args)
        return
    for kind in kinds:
        if len(kinds) > 1:
            print(f"\n{kind}:")
        print_stability_table(fractions[kind], args)


def shown(nodeid: str) -> str:
    """A test's id without its folders (``test_file.py::test_name[param]``): the test's own name is never cut."""
    path, _, name = nodeid.partition("::")
    return f"{path.rsplit('/', 1)[-1]}::{name}" if name else nodeid


def print_stability_table(fractions: dict[str, list[float]], args: argparse.Namespace) -> None:
    width = max([len(shown(n)) for n in fractions] + [4])
    print(f"{'test':{width}s} {'mean':>7s} {'min':>7s} {'max':>7s} {'CV':>7s} {'worst/med':>9s}")
    cvs, worst = [], []
    for nodeid, values in fractions.items():
        mean, median = statistics.fmean(values), statistics.median(values)
        cv = statistics.stdev(values) / mean if len(values) > 1 and mean > 0 else 0.0
        cvs.append(cv)
        worst.append(min(values) / median if median > 0 else 0.0)
        print(f"{shown(nodeid):{width}s} {mean:7.3f} {min(values):7.3f} {max(values):7.3f} {cv:7.1%} {worst[-1]:9.3f}")
    if cvs:
        print(f"median CV {statistics.median(cvs):.1%}, max CV {max(cvs):.1%}, lowest worst/median "
              f"{min(worst):.3f} over {len(cvs)} tests and {args.sessions} {'cold ' if args.cold else ''}sessions "
              "(targets: CV <= 3 % median, <= 6 % max; worst >= 0.92 x median)")


def print_loaded_table(fractions: dict[str, dict[str, list[float]]], notes: dict[str, dict[str, set[str]]],
                       args: argparse.Namespace) -> None:
    width = max([len(shown(n)) for n in fractions["quiet"]] + [4])
    print(f"{'test':{width}s} {'quiet':>7s} {'loaded':>7s} {'ratio':>7s} {'max':>7s}  cores (quiet / loaded)")
    ratios = []
    for nodeid, quiet in fractions["quiet"].items():
        loaded = fractions["loaded"].get(nodeid)
        if not loaded:
            continue
        ratio = statistics.median(loaded) / statistics.median(quiet)
        ratios.append(ratio)
        where = " / ".join(";".join(sorted(n for n in notes[k][nodeid] if n)) or "all" for k in ("quiet", "loaded"))
        print(f"{shown(nodeid):{width}s} {statistics.median(quiet):7.3f} {statistics.median(loaded):7.3f} "
              f"{ratio:7.3f} {max(quiet + loaded):7.3f}  {where}")
    if ratios:
        worst = max(ratios, key=lambda r: abs(r - 1))
        print(f"loaded / quiet (median fraction over {args.sessions} + {args.sessions} sessions, "
              f"{args.neighbours} busy neighbour(s)): {min(ratios):.3f} .. {max(ratios):.3f}, "
              f"furthest from 1: {worst:.3f} (target within 0.9 .. 1.1)")


if __name__ == "__main__":
    main()
