"""A/B sensitivity of ``--roofline-compare``: how small a planted slowdown the lockstep gate catches, and how often
it flags identical code, on this machine, quiet or beside busy neighbours.

A throwaway git repository holds a package of five workloads (a 768^3 fp32 GEMM and a 3x3 conv2d, compute-bound;
a 64 MiB copy and a 4M-element ``x*2+y``, memory-bound; a 4096-element add, a small op), each measured once per
planted slowdown (the test is parametrized by it) and, for 0 %, in ``--aa`` identical copies. Its first commit
plants nothing; the second plants, in the test of slowdown p, a busy wait of p % of each call's own time (no
extra FLOP or byte, as a worse kernel would look), or with ``--plant work`` p % more work in the copy, the
``x*2+y`` and the GEMM instead (more elements, more rows: counted, as in the A/B issue's held-out repository; a
wait after a memory-bound call lets its stores drain and reads short of p). Each session runs
``pytest --roofline --roofline-compare HEAD~1`` at the second commit, so the 0 % tests compare identical code
(A/A) and the others a known slowdown.

    python benchmarks/ab_sensitivity.py [--sessions 6] [--slowdowns 0 2 3 5 10] [--aa 1] [--neighbours 1]
        [--max-time 1.0] [--device cpu|cuda] [--pairs N] [--max-slowdown TOL ...] [--only WORKLOAD ...]
        [--plant wait|work]
        [--plugin DIR ...] [--keep DIR]

Prints, per workload and slowdown, the share of comparisons the gate failed as slower, and those it failed or
said slower (a steady or inconclusive test whose claim interval lies past a third of the band); the false-alarm share
over all A/A comparisons (flagged slower or faster: the time verdict worse or better); the A/A ratios' median
(symmetry: within +-0.5 % of 1) and between-session CV; the between-pair CV the sessions report (process pairs;
absent before them); and the cost of a compare session against a plain ``--roofline`` session of the same tests
(measured side by side, alternating). ``--device cuda``: the workloads on the GPU (4096^2 bf16 GEMM, 1 GiB copy,
the conv and the elementwise op), the planted slowdown a spin kernel (``torch.cuda._sleep``) queued after the
call, p % of its device time on average (after every k-th call only where a spin's own cost is more than that).
Every session counts analytically (on a GPU runner ``auto`` would profile the plain sessions under ncu). Say
which machine it ran on.
Run it against another checkout of the plugin with ``--plugin /that/checkout`` (the sessions import it); repeat
``--plugin`` to measure checkouts side by side, each session index running every one in turn (before/after
figures from separate runs of a shared host are not comparable).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from common import git, require, roofline_session, start_neighbours, stop_neighbours

from pytest_roofline.ab.verdict_text import said_move  # reads any checkout's records
from pytest_roofline.record.ab_record import ABRecord

WORKLOADS = '''
import functools, math, time
import torch

SHARES = {shares}  # planted slowdown per test parameter (percent -> share of the call's time)
DEVICE = {device!r}
PLANT = {plant!r}  # "wait": a busy wait after each call; "work": the copy, x*2+y and GEMM do p % more instead


def sized(n, percent):
    """A test's size: p % more where the plant is work (a bigger copy, more GEMM rows: as a change that does
    more work looks, counted, and with no idle time after the call for a copy's stores to drain in)."""
    share = SHARES.get(percent, 0.0)
    return round(n * (1 + share)) if PLANT == "work" and share > 0 else n


def waited(fn, percent):
    """The busy-wait plant, unless the plant is work (the test sized its data instead)."""
    return fn if PLANT == "work" else slowed(fn, percent)


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


@functools.cache
def sleep_cycles_per_second():
    """The rate of torch.cuda._sleep's spin, from one long spin timed with CUDA events."""
    torch.cuda._sleep(1_000_000)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(); torch.cuda._sleep(50_000_000); end.record(); end.synchronize()
    return 50_000_000 / (start.elapsed_time(end) / 1e3)


def device_seconds(fn, args, kwargs):
    """The median device time of one call, CUDA events around each of 21 calls, each queued behind a spin of
    four times the host's time to queue it (at least 2 ms), as the plugin's turns are (ab/cuda_turns.py):
    the events time the kernels, not the host's launches."""
    times = []
    torch.cuda.synchronize()
    queued = time.perf_counter(); fn(*args, **kwargs); queued = time.perf_counter() - queued
    spin = int(max(2e-3, 4 * queued) * sleep_cycles_per_second())
    for _ in range(21):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(spin); start.record(); fn(*args, **kwargs); end.record(); end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return sorted(times)[10]


def spin_overhead(fn, args, kwargs, own):
    """The device time a spin of no length adds after a call of ``own`` seconds: its launch and the gap before
    the next kernel (about 2 us on an H100, half a 4096-element add's own time)."""
    def then_spin(*a, **k):
        fn(*a, **k)
        torch.cuda._sleep(0)
    return max(0.0, device_seconds(then_spin, args, kwargs) - own)


def slowed_on_device(fn, share):
    """A GPU plant: on average ``share`` of the call's own device time, as a spin kernel queued after its
    kernels (as a slower kernel would look: no host sync, no extra FLOP or byte a counter sees). A spin costs
    some device time whatever its length, so where that is more than the share (short kernels) the spin
    follows every k-th call only, k the smallest that the share covers, and lasts what is left."""
    plant = {{}}

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if "cycles" not in plant:  # first call (the counted one): calibrate where no counter sees it
            from torch.utils._python_dispatch import _disable_current_modes
            with _disable_current_modes():
                own = device_seconds(fn, args, kwargs)
                target, fixed = share * own, spin_overhead(fn, args, kwargs, own)
            every = max(1, math.ceil(fixed / target)) if target > 0 else 1
            plant.update(every=every, calls=0,
                         cycles=int(max(0.0, every * target - fixed) * sleep_cycles_per_second()))
        result = fn(*args, **kwargs)
        plant["calls"] += 1
        if plant["calls"] % plant["every"] == 0:
            torch.cuda._sleep(plant["cycles"])
        return result
    return call


def slowed(fn, percent, measured=None):
    share = SHARES.get(percent, 0.0)
    if DEVICE == "cuda":
        return slowed_on_device(fn, share) if share > 0 else fn
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
from workloads import slowed, sized, waited, DEVICE

CASES = {cases}  # (percent, copy): copies of 0 % are A/A comparisons of identical code
IDS = [f"{{p}}-{{c}}" for p, c in CASES]
CUDA = DEVICE == "cuda"


@pytest.mark.roofline
@pytest.mark.parametrize("percent,copy", CASES, ids=IDS)
def test_gemm(roofline, percent, copy):
    n, dtype = (4096, torch.bfloat16) if CUDA else (768, torch.float32)
    rows = sized(n, percent)  # a work plant: p % more rows of the output, as the A/B issue's "slow" commit
    a, b = torch.randn(rows, n, device=DEVICE, dtype=dtype), torch.randn(n, n, device=DEVICE, dtype=dtype)
    roofline.measure(waited(torch.mm, percent), a, b)


@pytest.mark.roofline
@pytest.mark.parametrize("percent,copy", CASES, ids=IDS)
def test_conv2d(roofline, percent, copy):
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).eval().to(DEVICE)
    x = torch.randn(4, 64, 56, 56, device=DEVICE)
    with torch.no_grad():
        roofline.measure(slowed(conv, percent), x)


@pytest.mark.roofline
@pytest.mark.parametrize("percent,copy", CASES, ids=IDS)
def test_copy(roofline, percent, copy):
    n = sized(256 * 2**20 if CUDA else 16 * 2**20, percent)
    src, dst = torch.randn(n, device=DEVICE), torch.empty(n, device=DEVICE)
    roofline.measure(waited(dst.copy_, percent), src)


def axpy(x, y):
    return x * 2 + y


@pytest.mark.roofline
@pytest.mark.parametrize("percent,copy", CASES, ids=IDS)
def test_elementwise(roofline, percent, copy):
    n = sized(4 * 2**20, percent)
    x, y = torch.randn(n, device=DEVICE), torch.randn(n, device=DEVICE)
    roofline.measure(waited(axpy, percent), x, y)


@pytest.mark.roofline
@pytest.mark.parametrize("percent,copy", CASES, ids=IDS)
def test_small_add(roofline, percent, copy):
    x, y = torch.randn(4096, device=DEVICE), torch.randn(4096, device=DEVICE)
    roofline.measure(slowed(torch.add, percent), x, y)
'''


WORKLOAD_NAMES = ("gemm", "conv2d", "copy", "elementwise", "small_add")


def make_repo(root: Path, percents: list[float], copies: int, device: str, plant: str = "wait") -> Path:
    repo = root / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (repo / ".gitignore").write_text(".roofline/\n__pycache__/\n")
    cases = [(p, c) for p in percents for c in range(copies if p == 0 else 1)]
    (repo / "tests" / "test_ab.py").write_text(TESTS.format(cases=cases))
    (repo / "workloads.py").write_text(WORKLOADS.format(shares={}, device=device, plant=plant))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "A: nothing planted")
    (repo / "workloads.py").write_text(WORKLOADS.format(shares={p: p / 100 for p in percents if p}, device=device,
                                                        plant=plant))
    git(repo, "commit", "-qam", "B: planted slowdowns", "--allow-empty")  # A/A only: nothing planted
    return repo


def session(repo: Path, out: Path, compare: bool, max_time: float, pairs: int | None = None,
            plugin: Path | None = None, only: list[str] | None = None,
            max_slowdown: float | None = None, cores: str | None = None) -> tuple[float, dict, str]:
    """One session's wall time, results and terminal output; ``plugin``: a checkout of pytest-roofline to import
    instead; ``only``: these workloads' tests alone; ``max_slowdown``: the compare sessions' tolerance;
    ``cores``: ``--roofline-cores`` of every session."""
    args = ["tests", "--roofline-history=none", f"--roofline-max-time={max_time}", "--roofline-counter=analytic"]
    if cores is not None:
        args.append(f"--roofline-cores={cores}")
    if only:
        args += ["-k", " or ".join(f"test_{name}" for name in only)]
    if compare:
        args.append("--roofline-compare=HEAD~1")
        if pairs is not None:
            args.append(f"--roofline-compare-pairs={pairs}")
        if max_slowdown is not None:
            args.append(f"--roofline-compare-max-slowdown={max_slowdown}")
    done = roofline_session(out, args, cwd=repo, checkout=plugin, output=True)
    where = "" if plugin is None else f" with {plugin} first on PYTHONPATH"
    return done.seconds, done.required(f"pytest {' '.join(args)}{where}"), done.output


@dataclass
class Tally:
    """One plugin checkout's compare sessions, summed over the sessions."""

    flagged: dict[tuple[str, str], list[bool]] = field(default_factory=dict)  # failed as slower
    # failed as slower, or said slower (steady or inconclusive, the claim interval past a third of the band);
    # A/A: said slower or faster
    said: dict[tuple[str, str], list[bool]] = field(default_factory=dict)
    moved: dict[str, list[bool]] = field(default_factory=dict)  # A/A: time verdict worse or better
    ratios: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    between: dict[str, list[float]] = field(default_factory=dict)  # A/A: between-pair CV each comparison reported
    undecided: dict[str, list[bool]] = field(default_factory=dict)  # A/A: the time verdict inconclusive
    within: dict[str, list[float]] = field(default_factory=dict)  # A/A: each pair's own interval, half its width
    persistent: dict[str, list[float]] = field(default_factory=dict)  # A/A: spread that follows the processes
    # A/A: each pair's log ratio by which side led it (warmed up first, goes first in every turn pair)
    led: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    compare_s: list[float] = field(default_factory=list)
    plain_s: list[float] = field(default_factory=list)
    unjudged: list[str] = field(default_factory=list)  # "session: test outcome" of comparisons with no verdict
    sessions: int = 0

    def add(self, results: dict[str, Any]) -> None:
        pair_logs: dict[str, list[list[float]]] = {}  # workload -> per A/A copy, its first 3 pairs
        self.sessions += 1
        for test in results["tests"]:
            name = test["nodeid"].split("::")[1]
            workload, _, rest = name.partition("[")
            percent = rest.rstrip("]").split("-")[0]
            record = test.get("compare") or {}
            if "changes" not in record:
                self.unjudged.append(f"session {self.sessions}: {name} {test.get('outcome')}")
                continue
            key = (workload.removeprefix("test_"), percent)
            self.flagged.setdefault(key, []).append(record["verdict"] == "regressed")
            move = said_move(ABRecord.from_dict(record))
            said = move is not None if percent == "0" else (record["verdict"] == "regressed" or move == "slower")
            self.said.setdefault(key, []).append(said)
            self.ratios.setdefault(key, []).append(record["changes"]["time"]["ratio"])
            if percent != "0":
                continue
            time_verdict = record["changes"]["time"]["verdict"]
            self.moved.setdefault(key[0], []).append(time_verdict in ("worse", "better"))
            if isinstance(record.get("between_cv"), float):
                self.between.setdefault(key[0], []).append(record["between_cv"])
            self.undecided.setdefault(key[0], []).append(time_verdict in ("noisy", "inconclusive"))
            for region in test.get("regions") or []:
                for pair in (region.get("compare") or {}).get("within") or []:
                    if pair.get("ci"):
                        self.within.setdefault(key[0], []).append(math.log(pair["ci"][1] / pair["ci"][0]) / 2)
                    if pair.get("ratio") and pair.get("warm_first") in ("this", "ref"):
                        self.led.setdefault((key[0], pair["warm_first"]), []).append(math.log(pair["ratio"]))
            if len(record.get("pair_ratios") or []) >= 3:
                pair_logs.setdefault(key[0], []).append([math.log(r) for r in record["pair_ratios"][:3]])
        for workload, rows in pair_logs.items():
            share = persistent_share(rows)
            if share is not None:
                self.persistent.setdefault(workload, []).append(share)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--slowdowns", type=float, nargs="+", default=[0, 2, 3, 5, 10])
    parser.add_argument("--aa", type=int, default=1, help="identical copies of each workload's 0 %% test (A/A)")
    parser.add_argument("--neighbours", type=int, default=0, help="busy Python loops running beside the sessions")
    parser.add_argument("--plain-sessions", type=int, default=2, help="plain --roofline sessions for the cost")
    parser.add_argument("--max-time", type=float, default=1.0, help="--roofline-max-time of every session")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--pairs", type=int, default=None, help="--roofline-compare-pairs (default: the plugin's)")
    parser.add_argument("--cores", default=None,
                        help="--roofline-cores of every session (default: the plugin's auto, half the machine's "
                             "cores; 'all' on a 2-core VM runs each twin's calls on 2 threads, as auto does on a "
                             "4-core runner)")
    parser.add_argument("--max-slowdown", type=float, nargs="+", default=[None],
                        help="--roofline-compare-max-slowdown of the compare sessions (default: the plugin's, 0.03); "
                             "several: each measured side by side, as --plugin, and reported apart")
    parser.add_argument("--plant", choices=("wait", "work"), default="wait",
                        help="wait: a busy wait of p %% after each call (every workload); work: the copy and "
                             "x*2+y move p %% more elements and the GEMM computes p %% more rows instead, the "
                             "conv and the add wait (a wait after a memory-bound call lets its stores drain: on "
                             "the Xeon VM a 5 %% wait on the copy read 1.02-1.03)")
    parser.add_argument("--only", nargs="+", choices=WORKLOAD_NAMES, default=None,
                        help="these workloads alone (the cost then compares sessions of these alone)")
    parser.add_argument("--plugin", type=Path, action="append", default=[],
                        help="a checkout of pytest-roofline the sessions import (repeat it to compare checkouts "
                             "side by side: each session index runs every checkout in turn, each reported apart)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="copy each compare session's results.json here as it ends (read them if cut short)")
    args = parser.parse_args()
    percents = [int(p) if p == int(p) else p for p in args.slowdowns]
    plugins: list[Path | None] = [p.resolve() for p in args.plugin] or [None]
    # every checkout at every tolerance; a checkout's plain sessions serve all its tolerances
    variants = [(plugin, band) for plugin in plugins for band in args.max_slowdown]
    tallies = [Tally() for _ in variants]
    neighbours = start_neighbours(args.neighbours)
    try:
        with tempfile.TemporaryDirectory(prefix="ab-sensitivity-") as tmp:
            root = Path(tmp)
            repo = make_repo(root, percents, args.aa, args.device, args.plant)
            for index in range(args.sessions):
                # the checkouts in an order that rotates from one session index to the next
                turn = [(index + k) % len(variants) for k in range(len(variants))]
                for number, (plugin, band), tally in ((n, variants[n], tallies[n]) for n in turn):
                    if index < args.plain_sessions and band == args.max_slowdown[0]:
                        seconds, plain, _ = session(repo, root / f"plain-{index}-{number}", False, args.max_time,
                                                    plugin=plugin, only=args.only, cores=args.cores)
                        tally.plain_s.append(seconds)
                        if args.keep is not None:  # a plain session's times, beside the paired ones
                            args.keep.mkdir(parents=True, exist_ok=True)
                            (args.keep / f"plain-{index}-{number}.results.json").write_text(json.dumps(plain))
                    seconds, results, output = session(repo, root / f"compare-{index}-{number}", True,
                                                       args.max_time, args.pairs, plugin=plugin, only=args.only,
                                                       max_slowdown=band, cores=args.cores)
                    tally.compare_s.append(seconds)
                    if args.keep is not None:
                        args.keep.mkdir(parents=True, exist_ok=True)
                        name = f"compare-{index}" + (f"-{number}" if len(variants) > 1 else "")
                        (args.keep / f"{name}.results.json").write_text(json.dumps(results))
                        (args.keep / f"{name}.log").write_text(output)
                    tally.add(results)
                    print(f"session {index + 1}/{args.sessions}" + (f" ({plugin})" if plugin else "")
                          + ("" if band is None else f" (max_slowdown {band})") + f": {seconds:.0f} s",
                          file=sys.stderr)
    finally:
        stop_neighbours(neighbours)
    require(sum(len(v) for t in tallies for v in t.flagged.values()), "no compare session judged a test")
    for number, ((plugin, band), tally) in enumerate(zip(variants, tallies)):
        if not tally.plain_s:  # its checkout's plain sessions ran under the first tolerance
            tally.plain_s = tallies[variants.index((plugin, args.max_slowdown[0]))].plain_s
        if plugin is not None or len(args.max_slowdown) > 1:
            print(f"\n=== plugin: {plugin or 'installed'}" + ("" if band is None else f", max_slowdown {band}")
                  + (f" (--keep: compare-<session>-{number})" if len(variants) > 1 else ""))
        report(args, percents, tally, band)
        levels(tally)
        orders(tally)


def persistent_share(rows: list[list[float]]) -> float | None:
    """Of the spread between pairs, the share that follows the pair's processes from one test to the next
    (the same pool serves every test of a session): the variance of each pair's mean log ratio over the A/A
    copies against the variance of all, both about the grand mean; None below two copies or with no spread."""
    if len(rows) < 2:
        return None
    every = [v for row in rows for v in row]
    grand = statistics.fmean(every)
    total = statistics.fmean([(v - grand) ** 2 for v in every])
    if total <= 0:
        return None
    means = [statistics.fmean(row[j] for row in rows) for j in range(len(rows[0]))]
    return statistics.fmean([(m - grand) ** 2 for m in means]) / total


def levels(tally: Tally) -> None:
    """Which level of variance dominates, per workload, over the A/A comparisons."""
    undecided, within, between = tally.undecided, tally.within, tally.between
    ratios, persistent = tally.ratios, tally.persistent
    print("A/A variance by level: inside a pair (median half-width of a pair's own interval), between process "
          "pairs (median CV), between sessions (CV of the ratios); share of the pairs' spread that follows the "
          "pair's processes across tests (about 1/--aa if nothing does); share of comparisons inconclusive")
    for workload in sorted(undecided):
        same = ratios.get((workload, "0"), [])
        session_cv = statistics.stdev(same) / statistics.fmean(same) if len(same) > 1 else float("nan")
        inside = statistics.median(within[workload]) if within.get(workload) else float("nan")
        pairs = statistics.median(between[workload]) if between.get(workload) else float("nan")
        follows = statistics.median(persistent[workload]) if persistent.get(workload) else float("nan")
        flags = undecided[workload]
        print(f"  {workload:12s} inside a pair ±{inside:.2%}, between pairs {pairs:.2%}, between sessions "
              f"{session_cv:.2%}; follows the processes {follows:.0%}; inconclusive {sum(flags)}/{len(flags)}")


def mean_and_error(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0] if values else math.nan), math.nan
    return statistics.fmean(values), statistics.stdev(values) / math.sqrt(len(values))


def orders(tally: Tally) -> None:
    """Symmetry over the A/A pairs: their mean log ratio (0 for sides measured alike), and the order effect:
    pairs led by this side against pairs led by REF (a side that warms up and goes first is measured slower or
    faster by this much; the lead alternates over a site's pairs, so it cancels there)."""
    print("A/A symmetry over the pairs: mean log ratio (this / REF) ± its standard error; pairs led by this side "
          "minus pairs led by REF (the order effect)")
    for workload in sorted({w for w, _ in tally.led}):
        by_this, by_ref = tally.led.get((workload, "this"), []), tally.led.get((workload, "ref"), [])
        mean, error = mean_and_error(by_this + by_ref)
        (this_mean, this_error), (ref_mean, ref_error) = mean_and_error(by_this), mean_and_error(by_ref)
        print(f"  {workload:12s} {mean:+.2%} ± {error:.2%} over {len(by_this) + len(by_ref)} pairs; led by this "
              f"minus led by REF {this_mean - ref_mean:+.2%} ± {math.hypot(this_error, ref_error):.2%} "
              f"({len(by_this)}:{len(by_ref)})")


def report(args: argparse.Namespace, percents: list[Any], tally: Tally, band: float | None) -> None:
    flagged, moved, ratios, between = tally.flagged, tally.moved, tally.ratios, tally.between
    compare_s, plain_s = tally.compare_s, tally.plain_s
    workloads = sorted({w for w, _ in flagged})
    print(f"\n{args.sessions} sessions on {args.device}, {args.neighbours} busy neighbour(s), {args.aa} A/A "
          f"cop{'y' if args.aa == 1 else 'ies'} per workload, --roofline-max-time {args.max_time}"
          + ("" if args.pairs is None else f", --roofline-compare-pairs {args.pairs}")
          + ("" if band is None else f", --roofline-compare-max-slowdown {band}")
          + ("" if args.cores is None else f", --roofline-cores {args.cores}"))
    print("share of comparisons failed as slower, per planted slowdown; A/A: flagged (slower or faster), median "
          "ratio, CV of the ratios between comparisons, median between-pair CV reported")
    print(f"{'workload':12s} " + " ".join(f"{str(p) + ' %':>8s}" for p in percents)
          + "   A/A flagged   median   ratio CV   pair CV")
    for workload in workloads:
        cells = []
        for p in percents:
            hits = flagged.get((workload, str(p)), [])
            cells.append(f"{sum(hits) / len(hits):8.0%}" if hits else f"{'-':>8s}")
        same = ratios.get((workload, "0"), [])
        cv = statistics.stdev(same) / statistics.fmean(same) if len(same) > 1 else float("nan")
        aa = moved.get(workload, [])
        pair_cv = f"{statistics.median(between[workload]):8.2%}" if between.get(workload) else f"{'-':>8s}"
        print(f"{workload:12s} " + " ".join(cells) + f"   {sum(aa):3d}/{len(aa):<3d}     "
              f"{statistics.median(same) if same else float('nan'):.4f}   {cv:7.2%}  {pair_cv}")
    every = [m for v in moved.values() for m in v]
    if every:
        print(f"A/A false alarms: {sum(every)} of {len(every)} comparisons ({sum(every) / len(every):.1%})")
    print("failed or said slower (a steady or inconclusive test whose claim interval lies past a third of the band), "
          "per planted slowdown; 0 %: said slower or faster")
    print(f"{'workload':12s} " + " ".join(f"{str(p) + ' %':>8s}" for p in percents))
    for workload in workloads:
        said = [tally.said.get((workload, str(p)), []) for p in percents]
        print(f"{workload:12s} " + " ".join(f"{sum(c)}/{len(c)}".rjust(8) if c else f"{'-':>8s}" for c in said))
    if tally.unjudged:  # a comparison with no verdict is neither caught nor clean: name it (--keep has the log)
        print(f"no verdict in {len(tally.unjudged)} comparisons: " + "; ".join(tally.unjudged))
    for p in percents:
        values = [statistics.median(ratios[(w, str(p))]) for w in workloads if (w, str(p)) in ratios]
        print(f"  {p} % planted: median paired ratio per workload " + ", ".join(f"{v:.3f}" for v in values))
    if plain_s:
        print(f"cost: compare session {statistics.median(compare_s):.1f} s, plain --roofline session "
              f"{statistics.median(plain_s):.1f} s: x{statistics.median(compare_s) / statistics.median(plain_s):.2f}")


if __name__ == "__main__":
    main()
