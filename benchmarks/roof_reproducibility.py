"""Roof reproducibility: the spread of every roof over repeated cold characterizations of one machine.

Each round is a fresh process running ``python -m pytest_roofline characterize --fresh --json`` (a CI job on
a fresh runner characterizes cold like this); the compiled kernels are shared between rounds through one
cache directory, so a round's time is the measuring alone (the first round also compiles, and says so).
Prints per roof the median, min, max and coefficient of variation over rounds (issue target: CV <= 3 %),
and each round's wall time (target: <= 20 s on 2 cores).

    python benchmarks/roof_reproducibility.py [--rounds 10] [--cores N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_roofline.characterize.fingerprint import cpu_model


def characterize(cache: Path, cores: int | None) -> tuple[dict, float]:
    command = [sys.executable, "-m", "pytest_roofline", "characterize", "--fresh", "--json", "--quiet",
               "--cache-dir", str(cache)]
    if cores is not None:
        command += ["--cores", str(cores)]
    started = time.perf_counter()
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(done.stdout), time.perf_counter() - started


def roofs(document: dict) -> dict[str, float]:
    out = {f"{k} GFLOP/s": v / 1e9 for k, v in document.get("compute", {}).items()}
    out.update({f"{k} GB/s": v / 1e9 for k, v in document.get("bandwidth", {}).items()})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--cores", type=int, default=None, help="roofs of N cores (default: all)")
    args = parser.parse_args()
    series: dict[str, list[float]] = {}
    times: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        cache = Path(os.environ.get("ROOF_BENCH_CACHE", scratch))
        for index in range(args.rounds):
            document, seconds = characterize(cache, args.cores)
            times.append(seconds)
            for name, value in roofs(document).items():
                series.setdefault(name, []).append(value)
            levels = ", ".join(f"{n} {v:.4g}" for n, v in roofs(document).items())
            print(f"round {index + 1}/{args.rounds}: {seconds:5.1f} s"
                  f"{' (compiles the kernels)' if index == 0 else ''}: {levels}", flush=True)
    print(f"\n{'roof':<16}{'median':>10}{'min':>10}{'max':>10}{'CV %':>8}")
    worst = 0.0
    for name, values in series.items():
        cv = 100 * statistics.pstdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0
        worst = max(worst, cv)
        print(f"{name:<16}{statistics.median(values):>10.4g}{min(values):>10.4g}{max(values):>10.4g}{cv:>8.1f}")
    later = times[1:] or times
    print(f"\nworst roof CV {worst:.1f} % (target <= 3 %); characterization {statistics.median(later):.1f} s median, "
          f"{max(later):.1f} s max after the first round (target <= 20 s); CPU: {cpu_model()}")



if __name__ == "__main__":
    main()
