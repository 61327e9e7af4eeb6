"""Command line: ``python -m pytest_roofline <command>``.

Each command lives in its own module exposing ``add_arguments(parser)`` and ``run(args) -> int``; the
module is imported only when its command runs, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMANDS: dict[str, tuple[str, str]] = {
    "characterize": ("pytest_roofline.characterize.cli", "measure this machine's roofline ceilings"),
    "import-ncu": ("pytest_roofline.counters.ncu.cli", "per-kernel roofline numbers from an Nsight Compute report"),
    "ncu-metrics": ("pytest_roofline.counters.ncu.metrics_cli", "the ncu metric names --roofline asks for on a compute capability"),
    "doctor": ("pytest_roofline.counters.ncu.doctor", "GPU runner preflight: will --roofline work here with the ncu counter?"),
    "audit-ops": ("pytest_roofline.counters.audit_cli", "which aten ops the analytic counter counts (OpInfo samples)"),
    "report": ("pytest_roofline.site.cli", "a static site of the roofline history: trends, change points, trajectories"),
    "bisect": ("pytest_roofline.compare.bisect_cli",
               "the first commit between GOOD and BAD whose tests are slower than at GOOD (A/B in lockstep)"),
    "thresholds": ("pytest_roofline.history.thresholds_cli",
                   "the min_fraction each test's history supports, and the smallest slowdown it catches"),
    "compare": ("pytest_roofline.history.compare_cli",
                "time, work and fraction of every test of session B against sessions A, as the baseline gate"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pytest_roofline", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text)
        command.set_defaults(_module=module_name)
        importlib.import_module(module_name).add_arguments(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(importlib.import_module(args._module).run(args))


if __name__ == "__main__":
    sys.exit(main())
