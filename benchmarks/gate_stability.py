"""Gate stability: coefficient of variation of each test's attained fraction over repeated sessions.

Target: CV <= 3 %. Each session is a fresh ``pytest --roofline`` process (machine characterization comes
from the cache, as in CI after the first run); fractions are read from each session's results.json.

    python benchmarks/gate_stability.py [--sessions 5] [pytest args, default: example_suite]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_session(directory: Path, pytest_args: list[str]) -> dict[str, float]:
    command = [sys.executable, "-m", "pytest", "--roofline", "--roofline-dir", str(directory), "-q",
               "-p", "no:cacheprovider", *pytest_args]
    subprocess.run(command, check=False, stdout=subprocess.DEVNULL)
    document = json.loads((directory / "results.json").read_text())
    return {t["nodeid"]: t["fraction"] for t in document["tests"] if t["fraction"] is not None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=5)
    args, pytest_args = parser.parse_known_args()
    pytest_args = pytest_args or ["example_suite"]
    fractions: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.sessions):
            start = time.perf_counter()
            for nodeid, value in run_session(Path(tmp) / f"s{index}", pytest_args).items():
                fractions.setdefault(nodeid, []).append(value)
            print(f"session {index + 1}/{args.sessions}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    print(f"{'test':78s} {'mean':>7s} {'min':>7s} {'max':>7s} {'CV':>7s}")
    cvs = []
    for nodeid, values in fractions.items():
        mean = statistics.fmean(values)
        cv = statistics.stdev(values) / mean if len(values) > 1 and mean > 0 else 0.0
        cvs.append(cv)
        print(f"{nodeid[-78:]:78s} {mean:7.3f} {min(values):7.3f} {max(values):7.3f} {cv:7.1%}")
    if cvs:
        print(f"median CV {statistics.median(cvs):.1%}, max CV {max(cvs):.1%} over {len(cvs)} tests "
              f"and {args.sessions} sessions (target <= 3 %)")


if __name__ == "__main__":
    main()
