"""``python -m pytest_roofline history compare A B``: the tests of session B against the sessions A names, with
the baseline gate's statistic. Exit 1 when a test regressed, 2 on bad input. (``--roofline-compare`` is the A/B
run against another commit; this compares sessions a history already holds.) ``compare A B`` is its old,
deprecated spelling."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pytest_roofline.errors import SettingError
from pytest_roofline.session.settings import parse_fail_on, parse_max_drop, parse_max_slowdown

T = TypeVar("T")
HELP = "time, work and fraction of every test of session B against sessions A, as the baseline gate"


def _checked(parse: Callable[[str, str], T], option: str) -> Callable[[str], T]:
    def convert(text: str) -> T:
        try:
            return parse(text, option)
        except SettingError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return convert


def add_arguments(parser: argparse.ArgumentParser) -> None:
    selectors = ("a session id, a commit (hex prefix, >= 7 characters), a branch, latest or latest~N (N sessions "
                 "before the latest), or a git revision (HEAD, HEAD~1, a tag: its commit's sessions)")
    parser.add_argument("a", metavar="A", help=f"the reference: {selectors}; several sessions (a commit or branch) "
                        "give each test up to its last 5 as the reference")
    parser.add_argument("b", metavar="B", help="the sessions judged, named as A; of several, the latest")
    parser.add_argument("--history", default=".roofline/history",
                        help="the history: a directory (default .roofline/history), s3://..., gs://..., az://... "
                             "or git:BRANCH")
    parser.add_argument("--json", action="store_true", help="print one record per test as JSON")
    parser.add_argument("--max-drop", type=_checked(parse_max_drop, "--max-drop"), default=0.10,
                        help="allowed drop of the fraction, as the gate's --roofline-max-drop (default 0.10)")
    parser.add_argument("--max-slowdown", type=_checked(parse_max_slowdown, "--max-slowdown"), default=0.10,
                        help="allowed rise of the time per call, as --roofline-max-slowdown (default 0.10)")
    parser.add_argument("--fail-on", type=_checked(parse_fail_on, "--fail-on"), default=("time", "fraction"),
                        help="what makes a test regressed: time, fraction, work, comma-separated, or none "
                             "(default time,fraction)")
    parser.add_argument("--machine-key", metavar="KEY",
                        help="compare this machine's sessions (default: B's machine; the folder names under --history)")


def run(args: argparse.Namespace) -> int:
    from pytest_roofline._safe_text import printable
    from pytest_roofline.errors import StoreError, StoreSettingError
    from pytest_roofline.gates.compare_table import table
    from pytest_roofline.gates.comparison import Tolerances
    from pytest_roofline.gates.history_compare import compare_plan, plan, pooled_spreads
    from pytest_roofline.history.location import is_location_url, open_store
    from pytest_roofline.history.reader import load
    from pytest_roofline.history.selectors import SelectorError

    if getattr(args, "command", None) == "compare":
        print("pytest-roofline: compare is deprecated; use history compare (the same arguments)", file=sys.stderr)
    try:
        history = (open_store(args.history, where="history compare: --history") if is_location_url(args.history)
                   else Path(args.history))
        if isinstance(history, Path) and not history.is_dir():
            print(f"history compare: --history {printable(args.history)}: not a directory (the history folder, default "
                  ".roofline/history)", file=sys.stderr)
            return 2
        loaded = load(history)
    except (StoreError, StoreSettingError) as exc:
        print(printable(f"history compare: {exc}"), file=sys.stderr)
        return 2
    for skipped in loaded.skipped:
        print(f"history compare: skipped {printable(skipped)}", file=sys.stderr)
    from pytest_roofline.history.selectors import git_revision, resolve_revision

    a, b = (resolve_revision(x, loaded.sessions, git_revision) for x in (args.a, args.b))
    try:
        chosen = plan(loaded.sessions, a, b, args.machine_key)
    except SelectorError as exc:
        print(printable(f"history compare: {exc}"), file=sys.stderr)  # ids and branches from the history: untrusted
        return 2
    pooled = pooled_spreads(chosen.pool)
    rows = compare_plan(chosen, Tolerances(args.max_drop, args.max_slowdown, tuple(args.fail_on)), pooled)
    code = 1 if any(r.verdict == "regressed" for r in rows) else 0
    from pytest_roofline.output.table import cli_width

    text = (json.dumps([r.to_dict() for r in rows], indent=2) if args.json
            else table(chosen, rows, pooled, cli_width()))
    return _print(text, code)


def _print(text: str, code: int) -> int:
    """Print; a reader that closed the pipe early (``| head``) gets no traceback, and the exit code stays."""
    from pytest_roofline._safe_text import printable  # test ids from the history: no escape sequences

    try:
        print(printable(text))
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that flush cannot fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return code
