"""``python -m pytest_roofline counters-agree ANALYTIC NCU``: each test of two results.json files (the same
suite under ``--roofline-counter analytic`` and ``ncu``) compared counter against counter: precision, bound and
FLOPs, the kernels that differ named (counters/agreement.py). ``--markdown`` prints docs/gpu.md's table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("analytic", type=Path, metavar="ANALYTIC", help="results.json of the analytic counter")
    parser.add_argument("ncu", type=Path, metavar="NCU", help="results.json of the ncu counter, same tests")
    parser.add_argument("--tolerance", type=float, default=0.05, help="FLOPs agree within this share (0.05)")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")


def run(args: argparse.Namespace) -> int:
    from pytest_roofline._safe_text import printable
    from pytest_roofline.counters.agreement import agreements, markdown
    from pytest_roofline.record.loader import read_json, valid_tests

    records = []
    for path in (args.analytic, args.ncu):
        try:
            document = read_json(path)  # bounded and validated as every record read back
            tests, _ = valid_tests(list(document.get("tests") or []) if isinstance(document, dict) else [])
        except (OSError, ValueError) as exc:
            print(f"counters-agree: {path}: {exc}", file=sys.stderr)
            return 2
        records.append(tests)
    found = agreements(records[0], records[1])
    if not found:
        print("counters-agree: the two files share no test (node id)", file=sys.stderr)
        return 1
    if args.markdown:
        print(printable(markdown(found, args.tolerance)))
    else:
        for item in found:
            print(printable(f"{item.nodeid}: {item.describe(args.tolerance)}"))
    return 0 if all(a.agrees(args.tolerance) for a in found) else 1
