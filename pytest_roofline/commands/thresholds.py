"""``python -m pytest_roofline thresholds HISTORY_DIR``: the min_fraction each test's history supports."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--last must be a whole number >= 1, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("history", metavar="HISTORY", nargs="?", default=".roofline/history",
                        help="a history (--roofline-history: a directory, s3://..., git:BRANCH; default "
                             ".roofline/history) or one file")
    from pytest_roofline.commands import deprecated_alias

    parser.add_argument("--machine-key", dest="machine", metavar="KEY",
                        help="only this machine key (the folder names under HISTORY)")
    deprecated_alias(parser, "--machine", "--machine-key", "machine")
    parser.add_argument("--last", type=_count, default=10, metavar="N",
                        help="each test's last N sessions on its machine (default 10); they should be clean runs")
    parser.add_argument("--json", action="store_true", help="print the advice as JSON")


def run(args: argparse.Namespace) -> int:
    from pytest_roofline._safe_text import printable
    from pytest_roofline.errors import StoreError, StoreSettingError
    from pytest_roofline.history.location import cli_location
    from pytest_roofline.history.reader import load
    from pytest_roofline.history.suggested_thresholds import advise
    from pytest_roofline.output.summary import thresholds_table

    try:
        loaded = load(cli_location(args.history, "thresholds"), key=args.machine)
    except (StoreError, StoreSettingError) as exc:
        print(printable(str(exc) if str(exc).startswith("thresholds") else f"thresholds: {exc}"), file=sys.stderr)
        return 2
    for skipped in loaded.skipped:
        print(f"thresholds: skipped {printable(skipped)}", file=sys.stderr)
    sessions = [s for s in loaded.sessions if args.machine is None or s.machine_key == args.machine]
    if not sessions:
        where = f" of machine {args.machine}" if args.machine else ""
        print(f"thresholds: no session{where} in {args.history}", file=sys.stderr)
        return 1
    advice = advise(sessions, last=args.last)
    if args.json:
        print(json.dumps([{**dataclasses.asdict(a), "warning": a.warning} for a in advice], indent=2))
    else:
        from pytest_roofline.output.table import cli_width

        print(printable(thresholds_table(advice, cli_width())))  # test ids from the history: no escape sequences
    return 0
