"""Real process pairs for ``ab_rules.py --measured``: each A/B call site's per-pair log ratios, centred on the
site's own mean, from the results.json of ``--roofline-compare`` sessions (``ab_sensitivity.py --keep`` keeps
them). Centring takes out the site's true change, planted or not, and leaves how its pairs spread, tails
included.

    python benchmarks/pairs_from_results.py RESULTS.json ... --match conv2d [--out pairs.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any


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
    parser.add_argument("results", type=Path, nargs="+")
    parser.add_argument("--match", required=True, help="a substring of the tests' node ids (e.g. conv2d)")
    parser.add_argument("--out", type=Path, default=None, help="where to write the JSON list (default: stdout)")
    args = parser.parse_args()
    sites = [logs for path in args.results for logs in site_logs(json.loads(path.read_text()), args.match)]
    values = centred(sites)
    if len(values) < 10:
        parser.error(f"--match {args.match!r}: {len(values)} pairs in {len(sites)} call sites; ab_rules.py needs 10")
    text = json.dumps([round(v, 6) for v in values])
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    print(f"{len(values)} pairs from {len(sites)} call sites; their spread {statistics.stdev(values):.2%}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
