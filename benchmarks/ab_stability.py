"""Two checkouts side by side: sessions alternate between them; per checkout, each test's fraction CV and
worst ÷ median over the sessions.

    python benchmarks/ab_stability.py BEFORE_CHECKOUT [--after .] [--sessions 5] [--neighbours 0]
        [--before-cache DIR] [pytest args, default: benchmarks/heldout benchmarks/heldout_alloc]

Each session is a fresh ``pytest --roofline`` with ``PYTHONPATH`` set to the checkout, run in it (a git worktree
of the old commit, for instance). ``--before-cache`` gives the old checkout a characterization cache of its own
(its cache format may differ). ``--neighbours N`` runs N busy processes beside every session.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def session(root: Path, cache: str | None, directory: Path, pytest_args: list[str], neighbours: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    if cache:
        env["PYTEST_ROOFLINE_CACHE"] = cache
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(neighbours)]
    try:
        subprocess.run([sys.executable, "-m", "pytest", "--roofline", "--roofline-dir", str(directory), "-q",
                        "-p", "no:cacheprovider", *pytest_args], cwd=root, env=env, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    tests = json.loads((directory / "results.json").read_text())["tests"]
    return {t["nodeid"].split("::")[-1]: t["fraction"] for t in tests if t["fraction"] is not None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("--after", type=Path, default=HERE.parent)
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--neighbours", type=int, default=0)
    parser.add_argument("--before-cache", default=None)
    args, pytest_args = parser.parse_known_args()
    pytest_args = [str(Path(a).resolve()) if Path(a).exists() else a for a in pytest_args] or [
        str(HERE / "heldout"), str(HERE / "heldout_alloc")]
    checkouts = {"before": (args.before.resolve(), args.before_cache), "after": (args.after.resolve(), None)}
    seen: dict[str, dict[str, list[float]]] = {name: {} for name in checkouts}
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.sessions):
            for name, (root, cache) in checkouts.items():
                for test, fraction in session(root, cache, Path(tmp) / f"{name}{index}", pytest_args,
                                              args.neighbours).items():
                    seen[name].setdefault(test, []).append(fraction)
            print(f"session {index + 1}/{args.sessions} done", file=sys.stderr)
    for name, tests in seen.items():
        cv = {t: statistics.stdev(v) / statistics.fmean(v) for t, v in tests.items() if len(v) > 1}
        worst = [min(v) / statistics.median(v) for v in tests.values()]
        if cv:
            noisiest = max(cv, key=lambda t: cv[t])
            print(f"{name:6s} neighbours={args.neighbours}: median CV {statistics.median(cv.values()):.1%}, max CV "
                  f"{cv[noisiest]:.1%} ({noisiest}), lowest worst/median {min(worst):.3f} over {len(cv)} tests x "
                  f"{args.sessions} sessions")


if __name__ == "__main__":
    main()
