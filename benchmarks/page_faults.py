"""Page-fault modes over sessions: does every session time its calls in the same memory state?

Runs fresh ``pytest --roofline`` sessions of allocation-heavy held-out calls, alternating the malloc
policies given (side by side, so host drift hits both alike), and prints per test and policy how many
sessions timed fault-free calls and how many faulted after warm-up, with the fractions' median and the
worst session ÷ median (issue target: >= 0.90).

    python benchmarks/page_faults.py [--sessions 20] [--malloc tuned default] [pytest args]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
HELDOUT = [str(HERE / "heldout_alloc"), str(HERE / "heldout" / "test_heldout.py") + "::test_conv2d"]


def run_session(directory: Path, malloc: str, pytest_args: list[str]) -> list[dict]:
    command = [sys.executable, "-m", "pytest", "--roofline", "--roofline-dir", str(directory), "-q",
               "-p", "no:cacheprovider", "--roofline-malloc", malloc, *pytest_args]
    done = subprocess.run(command, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        return json.loads((directory / "results.json").read_text())["tests"]
    except (OSError, ValueError):
        print(f"session in {directory} wrote no results (exit {done.returncode}):\n{done.stdout[-2000:]}",
              file=sys.stderr)
        return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--malloc", nargs="+", default=["tuned", "default"])
    args, pytest_args = parser.parse_known_args()
    pytest_args = pytest_args or HELDOUT
    # (policy, test) -> per session: (fraction, faults per timed call, a neighbour was busy beside it)
    seen: dict[tuple[str, str], list[tuple[float, float, bool]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.sessions):
            for malloc in args.malloc:
                for test in run_session(Path(tmp) / f"{malloc}{index}", malloc, pytest_args):
                    if test["fraction"] is None:
                        continue
                    faults = max(r["timing"].get("faults_per_call", 0.0) for r in test["regions"])
                    placed = [r.get("cores") or {} for r in test["regions"]]
                    busy = any(c.get("contended") or (c.get("load_beside") or 0) >= 0.5 for c in placed)
                    seen.setdefault((malloc, test["nodeid"].split("::")[-1]), []).append(
                        (test["fraction"], faults, busy))
            print(f"session {index + 1}/{args.sessions} done", file=sys.stderr)
    print(f"{'policy':8s} {'test':28s} {'fault-free':>10s} {'faulting':>8s} {'faults/call':>11s} "
          f"{'median':>7s} {'worst/median':>12s}")
    for (malloc, name), values in sorted(seen.items()):
        fractions = [f for f, _, _ in values]
        faulting = [n for _, n, _ in values if n > 0]
        median = statistics.median(fractions)
        print(f"{malloc:8s} {name[-28:]:28s} {len(values) - len(faulting):10d} {len(faulting):8d} "
              f"{statistics.median(faulting) if faulting else 0:11.0f} {median:7.3f} "
              f"{min(fractions) / median if median else 0:12.3f}")
    print("\nper session (fraction, a * where a neighbour kept a core beside it busy or it was contended):")
    for (malloc, name), values in sorted(seen.items()):
        print(f"{malloc:8s} {name[-28:]:28s} " + " ".join(f"{f:.3f}{'*' if busy else ''}" for f, _, busy in values))


if __name__ == "__main__":
    main()
