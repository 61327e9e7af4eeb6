"""Which level of variance an A/B comparison's A/A call sites show, from the results.json of ``--roofline-compare``
sessions (``ab_sensitivity.py --keep`` keeps them; each file one session). For each workload:

- **turns**: a pair's own standard error (its turns' 95 % interval / 3.92), the median over pairs;
- **pairs**: the standard deviation of a site's pairs' log ratios, the median over sites;
- **sessions**: whether the sessions' mean ratios differ by more than their pairs explain (a level shared by every
  pair of one session, such as the twins' common zygote, would show here): F = the variance of the sessions'
  means over the variance their own pairs predict (each pair's log ratio averaged over the session's A/A sites,
  which share the pairs; ~1 where no such level exists);
- **cohort**: the pairs that joined at a site against those that had run earlier tests of the session: the
  variance of their difference in units of its standard error (Student t: about df/(df-2) where no cohort effect),
  and how closely the pairs of each group agree among themselves;
- **coverage**: the share of A/A sites whose 90 % t-interval over the pairs excludes 1 (10 % nominal; a little more
  under the sequential stop, which ends a site early where its pairs happen to agree).

    python benchmarks/pair_levels.py RESULTS.json ... [--aa-plant 0]

Node ids as ``ab_sensitivity.py`` names them: ``test_<workload>[<plant>-<copy>]``; the A/A sites are those of
plant ``--aa-plant``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NODE = re.compile(r"test_(?P<workload>\w+)\[(?P<plant>[^-\]]+)-(?P<copy>[^\]]+)\]")

try:  # the quantiles; the script runs without them
    from scipy import stats as _stats
except ImportError:  # pragma: no cover
    _stats = None


def t95(df: int) -> float:
    """One-sided 95 % Student t quantile (the 90 % two-sided interval); the normal one without scipy."""
    return float(_stats.t.ppf(0.95, df)) if _stats is not None else 1.6449


@dataclass
class Site:
    """One A/A call site of one session: its pairs' log ratios in pool order, each pair's own standard error, and
    how many of its pairs the session had started before this site."""

    workload: str
    logs: list[float]
    own_se: list[float]
    veterans: int


@dataclass
class Session:
    sites: dict[str, list[Site]] = field(default_factory=lambda: defaultdict(list))


def read_session(results: dict[str, Any], aa_plant: str) -> Session:
    """The A/A sites of one session, in the order its tests ran (which pairs are veterans follows that order)."""
    session = Session()
    started = 0
    for test in results.get("tests", []):
        match = NODE.search(test.get("nodeid", ""))
        for site in (test.get("compare") or {}).get("sites") or []:
            ratios = [r for r in site.get("pair_ratios") or [] if isinstance(r, (int, float)) and r > 0]
            if match and match["plant"] == aa_plant and ratios:
                own = [(math.log(w["ci"][1]) - math.log(w["ci"][0])) / 3.92 for w in site.get("within") or []
                       if w.get("ci") and w["ci"][0] > 0 and w["ci"][1] > w["ci"][0]]
                session.sites[match["workload"]].append(Site(match["workload"], [math.log(r) for r in ratios],
                                                             own, min(started, len(ratios))))
            started = max(started, len(ratios))
    return session


def session_mean(sites: Sequence[Site]) -> tuple[float, float, int] | None:
    """(mean, its variance as the pairs predict it, pairs) over the pairs every site of the session ran: each
    pair's log ratios averaged over the sites first. None below 3 common pairs."""
    common = min(len(s.logs) for s in sites)
    if common < 3:
        return None
    rows = [statistics.fmean(s.logs[i] for s in sites) for i in range(common)]
    return statistics.fmean(rows), statistics.variance(rows) / common, common


def session_f(means: Sequence[tuple[float, float, int]]) -> tuple[float, int, int] | None:
    """F = variance of the sessions' means / the mean variance their pairs predict, and its degrees of freedom
    (sessions - 1, the pairs' sum of (pairs - 1))."""
    if len(means) < 3:
        return None
    predicted = statistics.fmean(m[1] for m in means)
    if predicted <= 0:
        return None
    return (statistics.variance([m[0] for m in means]) / predicted, len(means) - 1,
            sum(m[2] - 1 for m in means))


def cohort_t(site: Site) -> tuple[float, int] | None:
    """The mean of the pairs that joined at this site minus that of the veterans, over its standard error (the
    pooled spread about each group's own mean), and the degrees of freedom; None below 2 in either group."""
    old, new = site.logs[:site.veterans], site.logs[site.veterans:]
    if len(old) < 2 or len(new) < 2:
        return None
    df = len(old) + len(new) - 2
    pooled = (sum((v - statistics.fmean(old)) ** 2 for v in old)
              + sum((v - statistics.fmean(new)) ** 2 for v in new)) / df
    if pooled <= 0:
        return None
    return (statistics.fmean(new) - statistics.fmean(old)) / math.sqrt(pooled * (1 / len(old) + 1 / len(new))), df


def outside_90(site: Site) -> bool | None:
    """Whether the site's 90 % t-interval over its pairs excludes 1; None below 3 pairs."""
    k = len(site.logs)
    if k < 3:
        return None
    sd = statistics.stdev(site.logs)
    return sd == 0 or abs(statistics.fmean(site.logs)) > t95(k - 1) * sd / math.sqrt(k)


def within_groups(sites: Sequence[Site]) -> tuple[float, float] | None:
    """The pooled standard deviation of the pairs about their own group's mean: (veterans, pairs that joined at
    the site), over the sites with two or more of each. Pairs started together that agree more among themselves
    than the veterans do, while their group stands apart, share something the t-interval counts as independent."""
    groups: tuple[list[float], list[float]] = ([], [])
    dof = [0, 0]
    for site in sites:
        old, new = site.logs[:site.veterans], site.logs[site.veterans:]
        if len(old) < 2 or len(new) < 2:
            continue
        for index, group in enumerate((old, new)):
            centre = statistics.fmean(group)
            groups[index].extend(v - centre for v in group)
            dof[index] += len(group) - 1
    if not dof[0] or not dof[1]:
        return None
    old_sd, new_sd = (math.sqrt(sum(v * v for v in g) / d) for g, d in zip(groups, dof))
    return old_sd, new_sd


def report(sessions: Iterable[Session]) -> list[str]:
    by_workload: dict[str, list[list[Site]]] = defaultdict(list)
    for session in sessions:
        for workload, sites in session.sites.items():
            by_workload[workload].append(sites)
    lines = []
    for workload, per_session in sorted(by_workload.items()):
        sites = [s for group in per_session for s in group]
        own = [se for s in sites for se in s.own_se]
        spread = [statistics.stdev(s.logs) for s in sites if len(s.logs) >= 3]
        out = [o for s in sites if (o := outside_90(s)) is not None]
        lines.append(f"{workload}: {len(sites)} A/A call sites in {len(per_session)} sessions; a pair's own "
                     f"standard error {statistics.median(own) if own else math.nan:.2%} (median), the pairs' "
                     f"spread {statistics.median(spread) if spread else math.nan:.2%} (median sd); 90 % interval "
                     f"excludes 1 in {sum(out)}/{len(out)} (10 % nominal)")
        means = [m for group in per_session if (m := session_mean(group)) is not None]
        if (f := session_f(means)) is not None:
            bound = f", above {float(_stats.f.ppf(0.95, f[1], f[2])):.2f} at 95 %" if _stats is not None else ""
            lines.append(f"  sessions: F {f[0]:.2f} ({f[1]}, {f[2]} df; ~1 where nothing above the pairs "
                         f"varies{bound})")
        cohorts = [c for s in sites if (c := cohort_t(s)) is not None]
        if len(cohorts) > 1:
            null = statistics.fmean(df / (df - 2) if df > 2 else 3.0 for _, df in cohorts)
            groups = within_groups(sites)
            agree = "" if groups is None else (f"; pairs' sd about their group: veterans {groups[0]:.2%}, "
                                               f"joined together {groups[1]:.2%}")
            lines.append(f"  pairs that joined at a site against the veterans ({len(cohorts)} sites): var(t) "
                         f"{statistics.pvariance([t for t, _ in cohorts]):.2f} against {null:.2f} with no "
                         f"group effect{agree}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="+", help="results.json of compare sessions, one per session")
    parser.add_argument("--aa-plant", default="0", help="the plant of the A/A tests in the node ids (default 0)")
    args = parser.parse_args()
    sessions = [read_session(json.loads(path.read_text()), args.aa_plant) for path in args.results]
    if not any(s.sites for s in sessions):
        parser.error(f"no A/A call sites (node ids test_<workload>[{args.aa_plant}-<copy>]) in these files")
    print("\n".join(report(sessions)))


if __name__ == "__main__":
    main()
