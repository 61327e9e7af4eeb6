"""Emulated nights: the nightly gate as a chain of A/B comparisons (``--roofline-compare last``) against the
history gate (``--roofline-baseline``), side by side, on a new commit every night.

A throwaway git repository holds the held-out workloads (benchmarks/heldout: conv, GEMM, 128 MiB copy,
cache-resident add, LSTM) whose conftest busy-waits after every measured call for a share of its time that the
commit itself sets (``perf/plant.txt``), so REF's twin runs REF's share. The nights: one first night, then
``--clean`` clean nights (A/A: the same code as the night before), then ``--steps`` step nights, each slower
than the night before by ``--step`` percent, with ``--between`` clean nights after each step but the last
(A/A at the slower level). Every night, in turn:

- **A/B**: ``pytest --roofline --roofline-history H_ab --roofline-compare last`` (REF: the last night's commit);
- **history**: ``pytest --roofline --roofline-history H_hist --roofline-baseline H_hist`` (the gate before it:
  the commit's own sessions are never its baseline), counted from the night its history holds 5 sessions.

    python benchmarks/nightly.py [--clean 10] [--steps 5] [--step 10] [--between 1] [--keep DIR] [pytest args]

Prints, per arm and kind of night, test-runs failed and the verdicts; the cost of an A/B night against a
history night (wall time, measured side by side); and the chained trajectory (history/chain.py) of each test
over the clean nights (the largest |level - 1|, target <= 2 % for the compute-bound tests) and at the end
against the planted (1 + step)^steps. Exits 1 when a night wrote no results (it never reports an empty tally).
Say which machine it ran on.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from common import git, roofline_session

PLANT_READER = '''
# The planted share comes from the commit (plant.txt beside this file), not the environment: REF's twin runs in
# REF's worktree and so busy-waits REF's share. The wrapper is always there (share 0 included): its own cost
# is the same every night.
INJECT = (Path(__file__).with_name("plant.txt").read_text().strip() or "0")
SLOWDOWN = float(INJECT)
'''


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    (repo / "perf").mkdir(parents=True)
    conftest = (HERE / "heldout" / "conftest.py").read_text()
    marker = ('INJECT = os.environ.get("ROOFLINE_INJECT_SLOWDOWN")  # unset: no wrapper at all\n'
              'SLOWDOWN = float(INJECT or 0)\n')
    if marker not in conftest:
        raise SystemExit("nightly: benchmarks/heldout/conftest.py changed: the plant reader no longer fits it")
    conftest = (conftest.replace(marker, PLANT_READER)
                .replace("import time\n", "import time\nfrom pathlib import Path\n", 1))
    (repo / "perf" / "conftest.py").write_text(conftest)
    shutil.copy(HERE / "heldout" / "test_heldout.py", repo / "perf" / "test_heldout.py")
    (repo / "pytest.ini").write_text("[pytest]\n")
    (repo / ".gitignore").write_text(".roofline*/\n__pycache__/\n")
    git(repo, "init", "-q", "-b", "main")
    return repo


def plan(clean: int, steps: int, between: int) -> list[tuple[str, int]]:
    """(kind, steps planted so far) per night: first, clean (A/A), step."""
    nights = [("first", 0)] + [("clean", 0)] * clean
    for k in range(1, steps + 1):
        nights.append(("step", k))
        if k < steps:
            nights += [("clean", k)] * between
    return nights


def commit_night(repo: Path, index: int, share: float) -> str:
    (repo / "perf" / "plant.txt").write_text(f"{share!r}\n")
    (repo / "NIGHT").write_text(f"{index}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"night {index}")
    return git(repo, "rev-parse", "HEAD")


def run(repo: Path, out: Path, args: list[str]) -> tuple[list[dict[str, Any]], float]:
    done = roofline_session(out, [*args, "perf"], cwd=repo, output=True)
    return done.required(f"the session in {out}")["tests"], done.seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", type=int, default=10)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--step", type=float, default=10.0, help="percent slower per step night")
    parser.add_argument("--between", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="copy both histories here at the end")
    parser.add_argument("--anchor-every", type=int, default=0, metavar="N",
                        help="every N-th night also compare with the night N before (--roofline-compare last~N), "
                             "an anchor that closes a loop of the chain")
    parser.add_argument("--no-history-gate", action="store_true", help="run the A/B arm alone")
    args, pytest_args = parser.parse_known_args()

    from pytest_roofline.history.chain import trajectories
    from pytest_roofline.history.reader import load

    nights = plan(args.clean, args.steps, args.between)
    tally: dict[tuple[str, str], list[tuple[str, bool]]] = {}  # (arm, kind) -> (verdict, failed) per test-run
    seconds: dict[str, list[float]] = {"ab": [], "history": []}
    with tempfile.TemporaryDirectory(prefix="roofline-nights-") as tmp:
        root = Path(tmp)
        repo = make_repo(root)
        histories = {"ab": root / "h-ab", "history": root / "h-history"}
        for index, (kind, planted) in enumerate(nights):
            share = (1 + args.step / 100) ** planted - 1
            commit_night(repo, index, share)
            arms = ["ab", "history"] if index % 2 == 0 else ["history", "ab"]  # neither always first
            if args.no_history_gate:
                arms = ["ab"]
            if args.anchor_every and index >= args.anchor_every and index % args.anchor_every == 0:
                arms.append("anchor")
            for arm in arms:
                # NAME=VALUE: a spaced path to a folder that exists would move pytest's rootdir
                extra = ([f"--roofline-history={histories['ab']}", "--roofline-compare=last"] if arm == "ab"
                         else [f"--roofline-history={histories['ab']}",
                               f"--roofline-compare=last~{args.anchor_every}"] if arm == "anchor"
                         else [f"--roofline-history={histories['history']}",
                               f"--roofline-baseline={histories['history']}"])
                tests, wall = run(repo, root / f"out-{arm}-{index}", [*extra, *pytest_args])
                if arm == "anchor":
                    continue  # an edge for the chain, not a night of the tally
                seconds[arm].append(wall)
                counted = kind != "first" and (arm == "ab" or index > 5)  # the history gate: from 5 sessions on
                for test in tests if counted else []:
                    record = test.get("compare" if arm == "ab" else "baseline") or {}
                    tally.setdefault((arm, kind), []).append((str(record.get("verdict")),
                                                              test.get("outcome") == "failed"))
            history = f", history {seconds['history'][-1]:.0f} s" if seconds["history"] else ""
            print(f"night {index} ({kind}, share {share:.3f}): A/B {seconds['ab'][-1]:.0f} s{history}"
                  + (" (+ an anchor comparison)" if "anchor" in arms else ""), file=sys.stderr, flush=True)
        loaded = load(histories["ab"])
        if args.keep:
            for arm, folder in histories.items():
                shutil.copytree(folder, args.keep / arm, dirs_exist_ok=True)
    report(args, nights, tally, seconds, loaded.sessions, trajectories)
    return 0


def report(args: argparse.Namespace, nights: list[tuple[str, int]], tally: dict[tuple[str, str], list[Any]],
           seconds: dict[str, list[float]], sessions: list[Any], trajectories: Any) -> None:
    print(f"\n{len(nights)} nights: {args.clean} clean after the first, {args.steps} steps of {args.step:g} %, "
          f"{args.between} clean night(s) after each step but the last")
    print(f"{'arm':8s} {'nights':12s} {'test-runs':>9s} {'failed':>7s}  verdicts")
    for (arm, kind), runs in sorted(tally.items()):  # the anchors' comparisons are not tallied
        verdicts: dict[str, int] = {}
        for verdict, _ in runs:
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
        failed = sum(f for _, f in runs)
        shown = ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items(), key=lambda x: -x[1]))
        label = "A/A (clean)" if kind == "clean" else f"{args.step:g} % step"
        print(f"{arm:8s} {label:12s} {len(runs):9d} {failed:4d} ({failed / len(runs):.0%})  {shown}")
    ab = statistics.median(seconds["ab"][1:] or seconds["ab"])
    if seconds["history"]:
        hist = statistics.median(seconds["history"])
        print(f"cost: an A/B night {ab:.0f} s, a history night {hist:.0f} s (median wall time): ×{ab / hist:.2f}")
    paths = trajectories(sessions)
    if args.anchor_every:
        anchor = f"last~{args.anchor_every}"
        plain = trajectories([s for s in sessions if not any((t.get("compare") or {}).get("ref") == anchor
                                                              for t in s.tests.values())])
        by_id = {p.nodeid: p for p in plain}
        print(f"the chain with and without the {anchor} anchors, at the last night (level, 95 % interval; "
              "misclosure: chi-square of the loops over their degrees of freedom)")
        for path in paths:
            other, last = by_id.get(path.nodeid), path.nights[-1]
            alone = "" if other is None else (f"; chain alone ×{other.nights[-1].level:.3f} "
                                              f"[{other.nights[-1].low:.3f}, {other.nights[-1].high:.3f}]")
            loops = "" if path.misclosure is None else f", misclosure {path.misclosure:.2f} over {path.dof}"
            print(f"  {path.nodeid.split('::')[-1]:26s} with anchors ×{last.level:.3f} [{last.low:.3f}, "
                  f"{last.high:.3f}]{loops}{alone}")
    clean_end = args.clean  # the nights 0..clean are the first and the clean ones
    expected = (1 + args.step / 100) ** args.steps
    print(f"chained trajectory per test (history chain): over the {args.clean} clean nights, the largest "
          f"|level - 1|; at the last night, the level and its 95 % interval (planted: ×{expected:.3f})")
    for path in paths:
        clean = [n for n in path.nights[:clean_end + 1]]
        worst = max(abs(n.level - 1) for n in clean)
        last = path.nights[-1]
        print(f"  {path.nodeid.split('::')[-1]:26s} clean nights max |level-1| {worst:.1%}; last ×{last.level:.3f} "
              f"[{last.low:.3f}, {last.high:.3f}]; raw ×{last.raw or float('nan'):.3f}; segments "
              f"{1 + max(n.segment for n in path.nights)}")
    if not paths:
        raise SystemExit("nightly: the A/B history holds no A/B night: nothing was chained")


if __name__ == "__main__":
    sys.exit(main())
