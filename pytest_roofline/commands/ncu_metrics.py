"""``python -m pytest_roofline ncu-metrics --cc X.Y [--json]``: the metric names ``--roofline`` asks ncu for.

One name a line, so that ``ncu --query-metrics --metrics "$(python -m pytest_roofline ncu-metrics --cc 10.3 |
paste -sd,)"`` (or ``--chip``) can check them on the user's own machine. ``--json`` adds what each name feeds (a
precision, a memory level, the time) and the formula, and which source the name was checked against.
"""

from __future__ import annotations

import argparse
import json
import sys

from pytest_roofline.counters.ncu.metrics import (
    HALF_LANES_PER_INST,
    STOCK_SECTION_SOURCE,
    UnsupportedComputeCapability,
    cc_sources,
    format_cc,
    metric_set,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cc", required=True, metavar="MAJOR.MINOR", help="compute capability, e.g. 9.0, 10.3")
    parser.add_argument("--json", action="store_true",
                        help="names with the precision or level each feeds, the formula and the source")


def run(args: argparse.Namespace) -> int:
    try:
        chosen = metric_set(args.cc)
    except (UnsupportedComputeCapability, ValueError) as error:
        print(f"ncu-metrics: {error}", file=sys.stderr)
        return 2
    note = None
    if not chosen.checked:
        note = (f"CC {format_cc(chosen.cc)} is not in the stock section that the lists were checked against; "
                f"these are CC {format_cc(chosen.names_from)}'s names: check them with "
                "'ncu --query-metrics' before relying on them")
    if args.json:
        sources = cc_sources(chosen.cc)
        document = {
            "compute_capability": format_cc(chosen.cc),
            "checked": chosen.checked,
            "names_from": format_cc(chosen.names_from),
            "checked_against": STOCK_SECTION_SOURCE,
            "note": note,
            "metrics": [dict(entry, source=sources[entry["name"]])
                        for entry in chosen.describe(HALF_LANES_PER_INST)],
        }
        print(json.dumps(document, indent=2))
        return 0
    if note:
        print(f"ncu-metrics: {note}", file=sys.stderr)
    print("\n".join(chosen.names))
    return 0
