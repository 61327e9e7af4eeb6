"""Command line: ``pytest-roofline <command>`` (also ``python -m pytest_roofline <command>``).

Each command is a module of this package named after its verb, exposing ``add_arguments(parser)`` and
``run(args) -> int``; the heavy imports sit inside ``run``, so building the parser stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

PROG = "pytest-roofline"  # the console script; ``python -m pytest_roofline`` says the same in its usage lines
DESCRIPTION = ("pytest-roofline: roofline ceilings, reports and checks from the command line. "
               "The pytest plugin itself runs with pytest --roofline.")

COMMANDS: dict[str, tuple[str, str]] = {
    "characterize": ("pytest_roofline.commands.characterize", "measure this machine's roofline ceilings"),
    "import-ncu": ("pytest_roofline.commands.import_ncu",
                   "per-kernel roofline numbers from an Nsight Compute report"),
    "ncu-metrics": ("pytest_roofline.commands.ncu_metrics",
                    "the ncu metric names --roofline asks for on a compute capability"),
    "doctor": ("pytest_roofline.commands.doctor",
               "GPU runner preflight: will --roofline work here with the ncu counter?"),
    "counters-agree": ("pytest_roofline.commands.counters_agree",
                       "the analytic and ncu counters' records of the same tests compared: precision, bound, FLOPs"),
    "audit-ops": ("pytest_roofline.commands.audit_ops", "which aten ops the analytic counter counts (OpInfo samples)"),
    "report": ("pytest_roofline.commands.report",
               "a static site of the roofline history: trends, change points, trajectories"),
    "bisect": ("pytest_roofline.commands.bisect",
               "the first commit between GOOD and BAD whose tests are slower than at GOOD (A/B in lockstep)"),
    "thresholds": ("pytest_roofline.commands.thresholds",
                   "the min_fraction each test's history supports, and the smallest slowdown it catches"),
    "history": ("pytest_roofline.commands.history",
                ("a history store: list its sessions, copy them (create-only), chain nightly A/B ratios, compare "
                 "session B against sessions A")),
    "compare": ("pytest_roofline.commands.compare", "deprecated: history compare"),
}


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("pytest-roofline")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"{PROG} {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text[:1].upper() + help_text[1:] + ".")
        command.set_defaults(_module=module_name)
        importlib.import_module(module_name).add_arguments(command)
    return parser


class DeprecatedAlias(argparse.Action):
    """An old spelling of an option: it still works, and says once on stderr which name to use instead."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str, flag: bool = False,
                 **kwargs: Any) -> None:  # argparse's own keywords, each typed there, passed on as given
        self.new = new
        self.flag = flag
        super().__init__(option_strings, dest, nargs=0 if flag else None, help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(f"{PROG}: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, True if self.flag else values)


def deprecated_alias(parser: argparse.ArgumentParser, old: str, new: str, dest: str, flag: bool = False) -> None:
    """Accept ``old`` for the option ``new`` (stored in ``dest``), with a deprecation note when used."""
    parser.add_argument(old, dest=dest, action=DeprecatedAlias, new=new, flag=flag)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = int(importlib.import_module(args._module).run(args))
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, as other command-line tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's own flush at exit must not fail again
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
