"""Process pairs against turns: how an A/B call site's budget is best split, simulated on measured spreads.

A pair's log ratio is the sum of two draws: the pair's own state (``sp``, what fresh processes and fresh buffers
change; sampled only by more pairs) and its turns' noise (``st / sqrt(turns)``; shrunk by more turns). With the
budget a pair may take fixed (``--shares``: its share of ``--roofline-max-time``), the turns it holds scale with
that share (at least ``MIN_TURNS``), and the pool (``--pools``) caps the pairs. The rule is the plugin's own
(``benchmarks/ab_rules.one_comparison``: stop on the t-interval, the robust intervals tried last), so this
measures what the code would decide with each split; the cost is the pairs used times a pair's seconds, its
turns and its joining (``--join-s``: the twins run the test up to the call site).

The spreads come from kept A/A sessions (``--from DIR``: results.json files of ``ab_sensitivity.py --keep``): per
workload, ``st`` from the pairs' own Wilcoxon half-widths and turn counts, ``sp`` from what the pairs' spread
leaves over. Without ``--from``, the spreads measured on the 2-core Zen 4 VM at ``--roofline-max-time 1.0``
(2026-11-27, ``docs/ab-compare.md``, "Seventh round").

    python benchmarks/ab_budget.py [--from DIR ...] [--pools 8 12] [--shares 0.5 0.25] [--comparisons 2000]
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_rules import one_comparison

from pytest_roofline.compare.pairs import MIN_TURNS


@dataclass(frozen=True)
class Spread:
    """One workload's measured spreads, at the budget share and turn count they were measured with."""

    sp: float  # the pairs' own state, log scale
    st: float  # one turn's log ratio
    turns: float  # turns a pair held at ``share``
    share: float
    pair_s: float  # seconds a pair took at ``share``


# 2-core Zen 4 VM, --roofline-max-time 1.0, pairs of half the budget: what --from derives from the sixth
# session's four kept runs (2026-11-27, 20 sessions, 8 pairs of half the budget; `ab_sensitivity.py --keep`)
MEASURED = {
    "copy": Spread(0.0126, 0.073, 40, 0.5, 0.50),
    "gemm": Spread(0.0, 0.058, 17, 0.5, 0.49),
    "conv2d": Spread(0.0, 0.037, 19, 0.5, 0.49),
    "elementwise": Spread(0.0045, 0.090, 68, 0.5, 0.50),
}


def spreads_from(folders: list[str]) -> dict[str, Spread]:
    """Each workload's spreads from its A/A comparisons (test ids ``test_<workload>[0-<copy>]``)."""
    found: dict[str, list[dict]] = {}
    for folder in folders:
        for path in sorted(glob.glob(str(Path(folder) / "*.results.json"))):
            tests = json.loads(Path(path).read_text()).get("tests", [])
            for test in tests if isinstance(tests, list) else tests.values():
                name = str(test.get("nodeid", "")).split("::")[-1]
                if "[0-" not in name:
                    continue
                for region in test.get("regions") or []:
                    if region.get("compare"):
                        found.setdefault(name.split("[")[0].removeprefix("test_"), []).append(region["compare"])
    result = {}
    for workload, records in found.items():
        within = [w for r in records for w in r["within"] if w.get("ci") and w["turns"] >= MIN_TURNS]
        if len(within) < 6:
            continue
        # a pair's own standard error from its 95 % Wilcoxon interval; a turn's spread from it and the turns
        se = [(math.log(w["ci"][1]) - math.log(w["ci"][0])) / (2 * 1.96) for w in within]
        st = statistics.median(s * math.sqrt(w["turns"]) for s, w in zip(se, within))
        spread = statistics.median(statistics.stdev(math.log(x) for x in r["pair_ratios"])
                                   for r in records if len(r["pair_ratios"]) >= 3)
        sp = math.sqrt(max(spread ** 2 - statistics.median(se) ** 2, 0.0))
        result[workload] = Spread(sp, st, statistics.median(w["turns"] for w in within), 0.5,
                                  statistics.median(w["measure_s"] for w in within))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="folders", nargs="*", default=[], help="kept ab_sensitivity sessions")
    parser.add_argument("--pools", type=int, nargs="+", default=[8, 10, 12, 16], help="most process pairs")
    parser.add_argument("--shares", type=float, nargs="+", default=[0.5, 0.33, 0.25],
                        help="a pair's share of --roofline-max-time")
    parser.add_argument("--measured-share", type=float, default=0.5, help="the share the kept sessions used")
    parser.add_argument("--outliers", type=float, default=0.05, help="share of outlier pairs")
    parser.add_argument("--outlier-size", type=float, default=0.10,
                        help="how far an outlier pair is off (the copy's far pairs: 3-15 %%)")
    parser.add_argument("--slowdowns", type=float, nargs="+", default=[0.05, 0.03])
    parser.add_argument("--join-s", type=float, default=0.17,
                        help="seconds to bring one more pair to the call site (both twins run the test up to it, "
                             "one after the other): 0.17 s for ab_sensitivity's tests on the 2-core VM; a test "
                             "that builds a model takes longer")
    parser.add_argument("--tolerance", type=float, default=0.03)
    parser.add_argument("--comparisons", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    spreads = MEASURED
    if args.folders:
        spreads = {k: Spread(v.sp, v.st, v.turns, args.measured_share, v.pair_s)
                   for k, v in spreads_from(args.folders).items()}
    print(f"{args.comparisons} comparisons per cell, tolerance {args.tolerance:.0%}, {args.outliers:.0%} outlier "
          f"pairs off by ±{args.outlier_size:.0%}; A/A: flagged; planted: caught; cost: seconds of pairs per call "
          f"site (mean)")
    head = "  ".join(f"{s:.0%} caught  cost" for s in args.slowdowns)
    for workload, spread in spreads.items():
        print(f"\n{workload}: pairs' own spread {spread.sp:.2%}, a turn's {spread.st:.1%}, "
              f"{spread.turns:.0f} turns in {spread.pair_s:.2f} s at share {spread.share}")
        print(f"{'pool':>5} {'share':>6} {'turns':>6}  {'A/A flagged':>11}  {head}")
        for pool in args.pools:
            for share in args.shares:
                turns = max(MIN_TURNS, spread.turns * share / spread.share)
                pair_s = spread.pair_s * turns / spread.turns
                cv = math.sqrt(spread.sp ** 2 + spread.st ** 2 / turns)
                draw = random.Random(args.seed)
                cells = []
                for slowdown in [0.0, *args.slowdowns]:
                    runs = [one_comparison(draw, math.log1p(slowdown), cv, args.outliers, args.tolerance, pool,
                                           False, outlier_size=args.outlier_size)
                            for _ in range(args.comparisons)]
                    wanted = ("slower", "faster") if slowdown == 0 else ("slower",)
                    cells.append((sum(v in wanted for v, _ in runs) / len(runs),
                                  statistics.fmean(k for _, k in runs) * (pair_s + args.join_s)))
                planted = "  ".join(f"{c:10.1%} {s:5.2f}" for c, s in cells[1:])
                print(f"{pool:5d} {share:6.2f} {turns:6.0f}  {cells[0][0]:11.2%}  {planted}")


if __name__ == "__main__":
    main()
