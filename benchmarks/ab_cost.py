"""The cost of a ``--roofline-compare`` session against a plain ``--roofline`` session of the same tests, for one
or more checkouts of the plugin measured side by side: sessions alternate between them (plain, then each
checkout's compare session, round after round), so a drift of the host hits every one alike.

    python benchmarks/ab_cost.py [--rounds 3] [--aa 1] [--slowdowns 0 5] [--max-time 0.3] [--neighbours 0]
        [--checkout /path/to/old/checkout ...]

The repository is ab_sensitivity.py's (five workloads; planted slowdowns). ``--checkout`` (repeatable) names
other checkouts of pytest-roofline to time beside this one (each session imports its plugin through
``PYTHONPATH``). Prints each one's median seconds and its ratio to the plain session's median. Say which machine
it ran on.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_sensitivity import make_repo, session

HERE = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--aa", type=int, default=1)
    parser.add_argument("--slowdowns", type=float, nargs="+", default=[0, 5])
    parser.add_argument("--max-time", type=float, default=0.3)
    parser.add_argument("--neighbours", type=int, default=0)
    parser.add_argument("--checkout", type=Path, action="append", default=[],
                        help="another checkout of pytest-roofline to time beside this one")
    args = parser.parse_args()
    checkouts = [HERE, *[c.resolve() for c in args.checkout]]
    percents = [int(p) if p == int(p) else p for p in args.slowdowns]
    neighbours = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.neighbours)]
    plain: list[float] = []
    compare: dict[Path, list[float]] = {c: [] for c in checkouts}
    try:
        with tempfile.TemporaryDirectory(prefix="ab-cost-") as tmp:
            root = Path(tmp)
            repo = make_repo(root, percents, args.aa, "cpu")
            for index in range(args.rounds):
                plain.append(session(repo, root / f"plain-{index}", False, args.max_time, plugin=HERE)[0])
                for number, checkout in enumerate(checkouts):
                    compare[checkout].append(session(repo, root / f"compare-{index}-{number}", True, args.max_time,
                                                     plugin=checkout)[0])
                print(f"round {index + 1}/{args.rounds}: plain {plain[-1]:.0f} s, compare "
                      + ", ".join(f"{compare[c][-1]:.0f} s" for c in checkouts), file=sys.stderr)
    finally:
        for process in neighbours:
            process.kill()
    base = statistics.median(plain)
    print(f"\n{args.rounds} rounds, {args.neighbours} busy neighbour(s), {args.aa} A/A cop"
          f"{'y' if args.aa == 1 else 'ies'} per workload, slowdowns {percents}, --roofline-max-time {args.max_time}")
    print(f"plain --roofline session (this checkout): median {base:.1f} s")
    for checkout in checkouts:
        seconds = statistics.median(compare[checkout])
        print(f"compare session with {checkout}: median {seconds:.1f} s, x{seconds / base:.2f} the plain session "
              f"({', '.join(f'{s:.0f}' for s in compare[checkout])} s)")


if __name__ == "__main__":
    main()
