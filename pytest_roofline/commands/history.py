"""``python -m pytest_roofline history {list,copy,chain,compare}``: look into a history store, copy sessions between
stores (a CI artifact's folder into a bucket, entries a refused store left in ``history-unsent/``, a move from
one store to another; create-only: what the target holds is never overwritten), and chain a machine's nightly
A/B ratios into each test's trajectory (history/chain.py), and compare two of its sessions (commands/compare.py)."""

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
    chain = sub.add_parser("chain", help="each test's time night by night from its nightly A/B ratios "
                                         "(--roofline-compare last), free of the runner's drift")
    chain.add_argument("history", metavar="HISTORY", nargs="?", default=".roofline/history",
                       help=f"the history ({EXAMPLES}; default .roofline/history)")
    chain.add_argument("--machine-key", metavar="KEY", help="this machine's nights (default: the machine with the "
                                                            "newest session)")
    chain.add_argument("-k", dest="match", metavar="TEXT", help="only tests whose node id contains TEXT")
    chain.add_argument("--json", action="store_true", help="print the trajectories as JSON")
    from pytest_roofline.commands import compare

    compare.add_arguments(sub.add_parser("compare", help=compare.HELP, description=compare.HELP[:1].upper()
                                         + compare.HELP[1:] + "."))


def run(args: argparse.Namespace) -> int:
    from pytest_roofline._safe_text import printable
    from pytest_roofline.errors import StoreError, StoreSettingError
    from pytest_roofline.history.location import open_store
    from pytest_roofline.history.store import copy_sessions
    from pytest_roofline.record.loader import MAX_FILE_BYTES

    if args.action == "chain":
        return _chain(args)
    if args.action == "compare":
        from pytest_roofline.commands import compare

        return compare.run(args)
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


def _chain(args: argparse.Namespace) -> int:
    import json

    from pytest_roofline._safe_text import printable
    from pytest_roofline.errors import StoreError, StoreSettingError
    from pytest_roofline.history.chain import table, trajectories
    from pytest_roofline.history.location import cli_location
    from pytest_roofline.history.reader import load

    try:
        loaded = load(cli_location(args.history, "history chain"), key=args.machine_key)
    except (StoreError, StoreSettingError) as exc:
        print(printable(f"history chain: {exc}"), file=sys.stderr)
        return 2
    for skipped in loaded.skipped:
        print(printable(f"history chain: skipped {skipped}"), file=sys.stderr)
    sessions = loaded.sessions
    key = args.machine_key or (sessions[-1].machine_key if sessions else None)
    sessions = [s for s in sessions if s.machine_key == key]
    names = sorted({n for s in sessions for n in s.tests if args.match is None or args.match in n})
    found = trajectories(sessions, names)
    if not found:
        print(printable(f"history chain: no A/B night of machine {key} in {args.history} (nights run with "
                        "--roofline-compare last record one)"), file=sys.stderr)
        return 1
    print(json.dumps([t.to_dict() for t in found], indent=2) if args.json
          else printable(f"machine {key}\n{table(found)}"))
    return 0
