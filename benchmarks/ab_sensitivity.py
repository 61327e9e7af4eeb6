"""A/B sensitivity of ``--roofline-compare``: how small a planted slowdown the lockstep gate catches, and how often
it flags identical code, on this machine, quiet or beside busy neighbours.

A throwaway git repository holds a package of four workloads (a 768^3 fp32 GEMM and a 3x3 conv2d, compute-bound;
a 64 MiB copy, memory-bound; a 4096-element add, a small op), each measured once per planted slowdown (the test
is parametrized by it). Its first commit plants nothing; the second plants, in the test of slowdown p, a busy
wait of p % of each call's own time (benchmarks/heldout/conftest.py's wrapper: no extra FLOP or byte, as a worse
kernel would look). Each session runs ``pytest --roofline --roofline-compare HEAD~1`` at the second commit, so
the 0 % tests compare identical code (A/A) and the others a known slowdown (A/B).

    python benchmarks/ab_sensitivity.py [--sessions 6] [--slowdowns 0 2 3 5 10] [--neighbours 1]

Prints, per workload and slowdown, the share of sessions whose gate failed the test as slower; the A/A paired
ratios' between-session CV; and the cost of a compare session against a plain ``--roofline`` session of the same
tests (measured side by side, alternating). Say which CPU it ran on when you quote it.
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

HERE = Path(__file__).resolve().parent

WORKLOADS = '''
import functools, time
import torch

SHARES = {shares}  # planted slowdown per test parameter (percent -> share of the call's time)


@functools.cache
def costs():
    def nothing():
        return None
    def median_call(fn):
        times = []
        for _ in range(2001):
            start = time.perf_counter(); fn(); times.append(time.perf_counter() - start)
        return sorted(times)[1000]
    lags = []
    for _ in range(2001):
        now = time.perf_counter(); until = now + 0.0
        while time.perf_counter() < until:
            pass
        lags.append(time.perf_counter() - now)
    cost = max(0.0, median_call(slowed(nothing, 0, (0.0, 0.0))) - median_call(nothing))
    return cost, sorted(lags)[1000]


def slowed(fn, percent, measured=None):
    share = SHARES.get(percent, 0.0)
    cost, lag = costs() if measured is None else measured

    @functools.wraps(fn)
    def call(*args, **kwargs):
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        now = time.perf_counter()
        until = now + share * (now - start + cost) + (lag if share > 0 else 0.0)
        while time.perf_counter() < until:
            pass
        return result
    return call
'''

TESTS = '''
import pytest, torch
from workloads import slowed

PERCENTS = {percents}


@pytest.mark.roofline
@pytest.mark.parametrize("percent", PERCENTS)
def test_gemm(roofline, percent):
    a, b = torch.randn(768, 768), torch.randn(768, 768)
    roofline.measure(slowed(torch.mm, percent), a, b)


@pytest.mark.roofline
@pytest.mark.parametrize("percent", PERCENTS)
def test_conv2d(roofline, percent):
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).eval()
    x = torch.randn(4, 64, 56, 56)
    with torch.no_grad():
        roofline.measure(slowed(conv, percent), x)


@pytest.mark.roofline
@pytest.mark.parametrize("percent", PERCENTS)
def test_copy(roofline, percent):
    src, dst = torch.randn(16 * 2**20), torch.empty(16 * 2**20)
    roofline.measure(slowed(dst.copy_, percent), src)


@pytest.mark.roofline
@pytest.mark.parametrize("percent", PERCENTS)
def test_small_add(roofline, percent):
    x, y = torch.randn(4096), torch.randn(4096)
    roofline.measure(slowed(torch.add, percent), x, y)
'''


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@b"}
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)


def make_repo(root: Path, percents: list[float]) -> Path:
    repo = root / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (repo / ".gitignore").write_text(".roofline/\n__pycache__/\n")
    (repo / "tests" / "test_ab.py").write_text(TESTS.format(percents=percents))
    (repo / "workloads.py").write_text(WORKLOADS.format(shares={}))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "A: nothing planted")
    (repo / "workloads.py").write_text(WORKLOADS.format(shares={p: p / 100 for p in percents if p}))
    git(repo, "commit", "-qam", "B: planted slowdowns")
    return repo


def session(repo: Path, out: Path, compare: bool) -> tuple[float, dict]:
    args = [sys.executable, "-m", "pytest", "tests", "--roofline", f"--roofline-dir={out}", "--roofline-history=none",
            "-q", "-p", "no:cacheprovider"]
    if compare:
        args.append("--roofline-compare=HEAD~1")
    start = time.perf_counter()
    subprocess.run(args, cwd=repo, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    return elapsed, json.loads((out / "results.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--slowdowns", type=float, nargs="+", default=[0, 2, 3, 5, 10])
    parser.add_argument("--neighbours", type=int, default=0, help="busy Python loops running beside the sessions")
    parser.add_argument("--plain-sessions", type=int, default=2, help="plain --roofline sessions for the cost")
    args = parser.parse_args()
    percents = [int(p) if p == int(p) else p for p in args.slowdowns]
    neighbours = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.neighbours)]
    try:
        with tempfile.TemporaryDirectory(prefix="ab-sensitivity-") as tmp:
            root = Path(tmp)
            repo = make_repo(root, percents)
            flagged: dict[tuple[str, object], list[bool]] = {}
            ratios: dict[tuple[str, object], list[float]] = {}
            compare_s, plain_s = [], []
            for index in range(args.sessions):
                if index < args.plain_sessions:
                    seconds, _ = session(repo, root / f"plain-{index}", compare=False)
                    plain_s.append(seconds)
                seconds, results = session(repo, root / f"compare-{index}", compare=True)
                compare_s.append(seconds)
                for test in results["tests"]:
                    name = test["nodeid"].split("::")[1]
                    workload, _, rest = name.partition("[")
                    percent = rest.rstrip("]")
                    record = test.get("compare") or {}
                    if "changes" not in record:
                        continue
                    key = (workload.removeprefix("test_"), percent)
                    flagged.setdefault(key, []).append(record["verdict"] == "regressed")
                    ratios.setdefault(key, []).append(record["changes"]["time"]["ratio"])
                print(f"session {index + 1}/{args.sessions}: {seconds:.0f} s", file=sys.stderr)
    finally:
        for process in neighbours:
            process.kill()
    workloads = sorted({w for w, _ in flagged})
    print(f"\n{args.sessions} sessions, {args.neighbours} busy neighbour(s); share of sessions failed as slower")
    print(f"{'workload':12s} " + " ".join(f"{str(p) + ' %':>8s}" for p in percents) + "   A/A ratio CV, range")
    for workload in workloads:
        cells = []
        for p in percents:
            hits = flagged.get((workload, str(p)), [])
            cells.append(f"{sum(hits) / len(hits):8.0%}" if hits else f"{'-':>8s}")
        same = ratios.get((workload, str(percents[0])), [])
        cv = statistics.stdev(same) / statistics.fmean(same) if len(same) > 1 else float("nan")
        span = f"{min(same):.3f}-{max(same):.3f}" if same else "-"
        print(f"{workload:12s} " + " ".join(cells) + f"   {cv:6.2%}  {span}")
    for p in percents:
        values = [statistics.median(ratios[(w, str(p))]) for w in workloads if (w, str(p)) in ratios]
        print(f"  {p} % planted: median paired ratio per workload " + ", ".join(f"{v:.3f}" for v in values))
    if plain_s:
        print(f"cost: compare session {statistics.median(compare_s):.1f} s, plain --roofline session "
              f"{statistics.median(plain_s):.1f} s: x{statistics.median(compare_s) / statistics.median(plain_s):.2f}")


if __name__ == "__main__":
    main()
