"""``python -m pytest_roofline history {list,copy}``: look into a history store, and copy sessions between
stores (a CI artifact's folder into a bucket, entries a refused store left in ``history-unsent/``, a move from
one store to another). Copies are create-only: what the target holds is never overwritten."""

from __future__ import annotations

import argparse
import sys

EXAMPLES = ".roofline/history, s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, az://CONTAINER/PREFIX, git:BRANCH"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = sub.add_parser("list", help="each machine key of a history with its session count and newest session")
    listing.add_argument("history", metavar="HISTORY", help=f"the history ({EXAMPLES})")
    copy = sub.add_parser("copy", help="copy the sessions SOURCE has and TARGET lacks (create-only)")
    copy.add_argument("source", metavar="SOURCE", help=f"where the sessions are ({EXAMPLES})")
    copy.add_argument("target", metavar="TARGET", help="where they go (the same forms)")
    copy.add_argument("--machine-key", metavar="KEY", help="only this machine's sessions")


def run(args: argparse.Namespace) -> int:
    from pytest_roofline.errors import StoreError, StoreSettingError
    from pytest_roofline.history.location import open_store
    from pytest_roofline.history.store import copy_sessions
    from pytest_roofline.history.validate import MAX_FILE_BYTES
    from pytest_roofline.output.safe_text import printable

    try:
        if args.action == "list":
            store = open_store(args.history, where="history list: HISTORY")
            folders: dict[str, list[str]] = {}
            for entry in store.entries():
                folders.setdefault(entry.folder or ".", []).append(entry.name.rsplit("/", 1)[-1])
            if not folders:
                print(f"history list: {store.url} holds no session", file=sys.stderr)
                return 1
            for folder, names in sorted(folders.items()):
                print(printable(f"{folder}  {len(names)} session(s), newest {max(names)}"))
            return 0
        source = open_store(args.source, where="history copy: SOURCE")
        target = open_store(args.target, where="history copy: TARGET")
        copied, present, failed = copy_sessions(source, target, MAX_FILE_BYTES, folder=args.machine_key)
    except (StoreError, StoreSettingError) as exc:
        print(printable(f"history {args.action}: {exc}"), file=sys.stderr)
        return 2
    for line in failed:
        print(printable(f"history copy: not copied: {line}"), file=sys.stderr)
    print(f"copied {len(copied)} session(s) from {source.url} to {target.url}; {len(present)} already there; "
          f"{len(failed)} failed")
    return 1 if failed else 0
