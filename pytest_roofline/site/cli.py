"""``python -m pytest_roofline report HISTORY_DIR``: write the static history site."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path


def _date(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date: {text!r} (use YYYY-MM-DD)") from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("history", type=Path, metavar="HISTORY_DIR", nargs="?", default=Path(".roofline/history"),
                        help="the history directory (--roofline-history; default .roofline/history)")
    parser.add_argument("--out", type=Path, default=Path(".roofline/site"),
                        help="folder to write the site to (default .roofline/site); open its index.html")
    from pytest_roofline.cli import deprecated_alias

    parser.add_argument("--machine-key", dest="machine", metavar="KEY",
                        help="only this machine key (the folder names under HISTORY_DIR)")
    deprecated_alias(parser, "--machine", "--machine-key", "machine")
    parser.add_argument("--since", type=_date, metavar="DATE",
                        help="only sessions that started on or after this date (UTC, YYYY-MM-DD)")
    parser.add_argument("--plotly-js", metavar="URL_OR_PATH",
                        help="load plotly.js from here instead of writing its 4.8 MB copy into the site: a URL, or "
                             "a path relative to the site's top folder (e.g. ../plotly.min.js, one copy shared by "
                             "several sites); default: one copy in the site, loaded by every page")


def run(args: argparse.Namespace) -> int:
    from pytest_roofline.errors import SiteError, SiteOutputError

    from .build import build_site

    if not args.history.is_dir():
        print(f"report: {args.history} is not a directory", file=sys.stderr)
        return 2
    try:
        result = build_site(args.history, args.out, args.machine, args.since, args.plotly_js)
    except SiteOutputError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 2
    except SiteError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {result.pages} pages for {result.tests} tests over {result.sessions} sessions to {result.out} "
          f"({result.size_bytes / 1e6:.1f} MB) in {result.seconds:.1f} s; open {result.out / 'index.html'}")
    return 0
