"""The A/B stopping rule and verdict over process pairs, on simulated pairs: false alarms and power.

No processes and no timing: each process pair's log ratio is drawn from a normal law with a chosen spread
between pairs (``--cv``), a share of outlier pairs (``--outliers``, ±25 %) and a true change (0 % for A/A,
``--slowdown`` for the planted one). The rule is the plugin's own (``ab.paired_stats.between_pairs``,
``decided``, ``verdict``; pairs added from three on as in ``ab.pairs.measure_site``), so this measures
what the code decides, not a model of it. ``--claim 95`` replays the rule before 2026-11-27 (a change claimed
at 95 %, at most 5 pairs); ``--t-only`` the rule without the robust intervals over 8 pairs or more (signed-rank,
trimmed mean); ``--no-trimmed`` the rule before the trimmed mean and ``--unchanged-95`` the one before
"unchanged" on the 90 % interval (both 2026-11-27, ninth round). The real between-pair spreads to try: 0.5-3 %
on the 2-core CPU VM, 4-10 % for launch-bound kernels on an H100 (docs/ab-compare.md, "Measured").

    python benchmarks/ab_rules.py [--comparisons 4000] [--cv 0.015 0.03 0.08] [--outliers 0 0.05] [--t-only]
        [--no-trimmed] [--unchanged-95] [--tolerance auto|0.03] [--steady-cv 0.02]
        [--measured RESULTS.json ... --match TEXT] [--seed 1]

``--measured`` draws the pairs from real ones instead (their tails as measured: heavier than the normal law's):
the per-pair log ratios of each call site of the tests whose node id contains ``--match`` in the results.json
of ``--roofline-compare`` sessions (``ab_sensitivity.py --keep DIR`` keeps them), centred on the site's own mean
(which takes out its true change, planted or not, and leaves how its pairs spread). ``--steady-cv`` tries
another threshold for the auto band.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_roofline.ab import paired_stats
from pytest_roofline.ab.paired_stats import (
    AUTO_BANDS,
    BetweenPairs,
    band_for,
    between_pairs,
    decided,
)
from pytest_roofline.ab.pairs import MAX_PROCESS_PAIRS, MIN_PROCESS_PAIRS
from pytest_roofline.ab.verdict import verdict


def one_comparison(draw: random.Random, log_change: float, cv: float, outliers: float, tolerance: float | None,
                   max_pairs: int, claim_at_95: bool, robust: bool = True,
                   outlier_size: float = 0.25, trimmed: bool = True,
                   equivalence: bool = True, measured: Sequence[float] = (),
                   settle: bool = True) -> tuple[str, int]:
    """(verdict, process pairs used) of one simulated call site; an outlier pair is off by ``outlier_size``;
    ``tolerance`` None: the auto band, as the plugin's default (``paired_stats.band_for``). ``measured``: real
    pairs' log ratios about their site's centre; each pair is one of them, drawn anew, times ``cv`` over their
    standard deviation (``cv`` 0: as measured), instead of the normal law and its outliers. ``settle``: False for
    the rule before "unchanged" could settle on the auto band's wide band (``paired_stats.decided``'s ``wide``)."""
    scale = cv / statistics.stdev(measured) if measured and cv > 0 else 1.0
    logs: list[float] = []

    def band() -> float:
        return band_for(tolerance, between_pairs([math.exp(v) for v in logs], robust=False))

    def top(final: bool) -> BetweenPairs:  # as measure_site: stop on the t-interval, the robust ones tried last
        result = between_pairs([math.exp(v) for v in logs], robust and final, trimmed, band())
        if not equivalence:  # "unchanged" on the 95 % interval, as before
            result = replace(result, equivalence_ci=None)
        return replace(result, claim_ci=result.ci) if claim_at_95 else result

    wide = AUTO_BANDS[1] if tolerance is None and settle else None  # as measure_site
    while True:
        value = log_change + scale * draw.choice(measured) if measured else draw.gauss(log_change, cv)
        if not measured and draw.random() < outliers:
            value += draw.choice((-1.0, 1.0)) * math.log1p(outlier_size)
        logs.append(value)
        if len(logs) >= MIN_PROCESS_PAIRS and (decided(top(False), band(), MIN_PROCESS_PAIRS, wide)
                                               or len(logs) >= max_pairs):
            return verdict(top(True).as_paired(), band()), len(logs)


def site_logs(results: dict[str, Any], match: str) -> list[list[float]]:
    """Each call site's pairs' log ratios, for the tests whose node id contains ``match`` (three pairs or more)."""
    sites = []
    for test in results.get("tests", []):
        if match not in test.get("nodeid", ""):
            continue
        for region in test.get("regions", []):
            ratios = (region.get("compare") or {}).get("pair_ratios") or []
            logs = [math.log(r) for r in ratios if isinstance(r, (int, float)) and r > 0]
            if len(logs) >= 3:
                sites.append(logs)
    return sites


def centred(sites: list[list[float]]) -> list[float]:
    """Each pair's deviation from its site's mean, times sqrt(k / (k - 1)) for k pairs: about the site's mean the
    deviations spread less than about the true centre by that factor."""
    return [(v - statistics.fmean(logs)) * math.sqrt(len(logs) / (len(logs) - 1)) for logs in sites for v in logs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comparisons", type=int, default=4000, help="simulated call sites per cell")
    parser.add_argument("--cv", type=float, nargs="+", default=[0.015, 0.03, 0.08],
                        help="spread of the pairs' log ratios")
    parser.add_argument("--outliers", type=float, nargs="+", default=[0.0, 0.05], help="share of ±25 %% pairs")
    parser.add_argument("--slowdown", type=float, default=0.05, help="the planted change")
    parser.add_argument("--tolerance", type=lambda v: None if v == "auto" else float(v), default=None,
                        help="--roofline-compare-max-slowdown: a number, or auto (the default, as the plugin's)")
    parser.add_argument("--claim", choices=("95", "spent"), default="spent",
                        help="spent: the plugin's rule (the claim's 1 %% spent over the looks: 99.99 %% before "
                             "the last, 99.3 %% at it); 95: an older rule (claimed at 95 %%, 5 pairs at most)")
    parser.add_argument("--t-only", action="store_true",
                        help="no robust interval over 8 pairs or more (the rule before them)")
    parser.add_argument("--no-trimmed", action="store_true",
                        help="no trimmed mean after the signed-rank interval (the rule before it)")
    parser.add_argument("--unchanged-95", action="store_true",
                        help="'unchanged' needs the 95 %% interval inside the band, not the 90 %% one (as before)")
    parser.add_argument("--steady-cv", type=float, default=None,
                        help="with --tolerance auto: the pair spread up to which the narrow band is used "
                             f"(the plugin's: {paired_stats.AUTO_STEADY_CV})")
    parser.add_argument("--no-settle", action="store_true",
                        help="auto: 'unchanged' only inside the narrow band (the rule before 2026-11-28)")
    parser.add_argument("--measured", type=Path, nargs="+", default=None, metavar="RESULTS.json",
                        help="results.json files of --roofline-compare sessions: pairs are drawn from their call "
                             "sites' real pairs (--match picks the tests), scaled to each --cv (0: as measured), "
                             "--outliers ignored")
    parser.add_argument("--match", default="", help="with --measured: a substring of the tests' node ids")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    measured: list[float] = []
    if args.measured:
        missing = [str(p) for p in args.measured if not p.is_file()]
        if missing:
            parser.error(f"--measured: no such file: {', '.join(missing)}")
        sites = [logs for path in args.measured for logs in site_logs(json.loads(path.read_text()), args.match)]
        measured = centred(sites)
        if len(measured) < 10:
            parser.error(f"--measured with --match {args.match!r}: {len(measured)} pairs in {len(sites)} call "
                         "sites; at least 10 are needed")
    if args.steady_cv is not None:  # a what-if: band_for reads the module's constant at each call
        paired_stats.AUTO_STEADY_CV = args.steady_cv
    old = args.claim == "95"
    max_pairs = 5 if old else MAX_PROCESS_PAIRS
    draw = random.Random(args.seed)
    rule = " (t only)" if args.t_only else " (no trimmed mean)" if args.no_trimmed else ""
    rule += ", unchanged at 95 %" if args.unchanged_95 else ""
    rule += ", unchanged only inside the narrow band" if args.no_settle and args.tolerance is None else ""
    claim = "at 95 %" if old else "at the looks' shared levels"
    print(f"claimed {claim}{rule}, at most {max_pairs} process pairs, "
          f"tolerance {'auto' if args.tolerance is None else f'{args.tolerance:.0%}'}"
          f"{f' (steady up to {paired_stats.AUTO_STEADY_CV:.1%})' if args.tolerance is None else ''}, "
          f"{args.comparisons} comparisons per cell")
    if measured:
        print(f"pairs drawn from {len(args.measured)} results file(s) "
              f"({len(measured)}, sd {statistics.stdev(measured):.2%}; pair CV 0: as measured)")
    print(f"{'pair CV':>8} {'outliers':>9}  {'A/A flagged':>12} {'pairs':>6}  {'planted caught':>15} {'pairs':>6}")
    for cv in args.cv:
        for outliers in args.outliers if not measured else [0.0]:
            cells = []
            for change in (0.0, math.log(1 + args.slowdown)):
                runs = [one_comparison(draw, change, cv, outliers, args.tolerance, max_pairs, old, not args.t_only,
                                       trimmed=not args.no_trimmed, equivalence=not args.unchanged_95,
                                       measured=measured, settle=not args.no_settle)
                        for _ in range(args.comparisons)]
                hits = (sum(v != "unchanged" and v != "inconclusive" for v, _ in runs) if change == 0.0 else
                        sum(v == "slower" for v, _ in runs))
                cells.append((hits / len(runs), statistics.fmean(k for _, k in runs)))
            (aa, aa_k), (caught, caught_k) = cells
            shown = cv if cv > 0 or not measured else statistics.stdev(measured)
            print(f"{shown:8.1%} {outliers:9.0%}  {aa:12.2%} {aa_k:6.1f}  {caught:15.1%} {caught_k:6.1f}")


if __name__ == "__main__":
    main()
