"""``python -m pytest_roofline report HISTORY_DIR``: write the static history site."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_roofline.history.store import HistoryStore
    from pytest_roofline.site.generate import BuildResult


def _date(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date: {text!r} (use YYYY-MM-DD)") from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("history", metavar="HISTORY", nargs="?", default=".roofline/history",
                        help="the history (--roofline-history: a directory, s3://..., git:BRANCH; default "
                             ".roofline/history)")
    parser.add_argument("--out", type=Path, default=Path(".roofline/site"),
                        help="folder to write the site to (default .roofline/site); open its index.html")
    from pytest_roofline.commands import deprecated_alias

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
    from pytest_roofline.errors import SiteError, SiteOutputError, StoreError, StoreSettingError
    from pytest_roofline.history.location import cli_location
    from pytest_roofline.site.generate import build_site

    try:
        history = cli_location(args.history, "report")
    except StoreSettingError as exc:
        print(f"report: {exc}" if not str(exc).startswith("report") else str(exc), file=sys.stderr)
        return 2
    if isinstance(history, Path) and not history.is_dir():
        print(f"report: {args.history} is not a directory", file=sys.stderr)
        return 2
    try:
        if isinstance(history, Path):
            result = build_site(history, args.out, args.machine, args.since, args.plotly_js)
        else:
            result = _build_from_store(history, args)
    except StoreError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 2
    except SiteOutputError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 2
    except SiteError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {result.pages} pages for {result.tests} tests over {result.sessions} sessions to {result.out} "
          f"({result.size_bytes / 1e6:.1f} MB) in {result.seconds:.1f} s; open {result.out / 'index.html'}")
    return 0


def _build_from_store(store: HistoryStore, args: argparse.Namespace) -> BuildResult:
    """The site of a remote store: its sessions copied into a temporary folder first (one machine's with
    --machine-key), each checked as any history file is when the site reads it."""
    import tempfile

    from pytest_roofline.history.store import DirectoryStore, copy_sessions
    from pytest_roofline.record.loader import MAX_FILE_BYTES
    from pytest_roofline.site.generate import build_site

    with tempfile.TemporaryDirectory(prefix="roofline-site-history-") as work:
        failed = copy_sessions(store, DirectoryStore(Path(work)), MAX_FILE_BYTES, folder=args.machine)[2]
        for line in failed:
            print(f"report: skipped {store.url}/{line}", file=sys.stderr)
        return build_site(Path(work), args.out, args.machine, args.since, args.plotly_js)
