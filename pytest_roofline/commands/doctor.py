"""``pytest-roofline doctor``: will ``--roofline`` work on this runner? The CPU path's checks, then the GPU
path's (ncu, the driver's counters, the metrics on each GPU), and a verdict with its exit code."""

from __future__ import annotations

import argparse

from pytest_roofline.doctor.checks import FAIL
from pytest_roofline.doctor.gpu import EXIT_FAIL, EXIT_OK, RUN_TIMEOUT_S, diagnose


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--python", metavar="PYTHON",
                        help="interpreter that runs the probe kernel under ncu (default: this one)")
    parser.add_argument("--timeout", type=float, default=RUN_TIMEOUT_S, help="seconds per ncu run (default 180)")


def run(args: argparse.Namespace) -> int:
    from pytest_roofline.doctor.cpu_checks import cpu_checks

    cpu = cpu_checks()
    print("CPU path (any machine):")
    for check in cpu:
        print(check.line())
    cpu_failed = [c.name for c in cpu if c.status == FAIL]
    print("GPU path (the ncu counter):")
    diagnosis = diagnose(python=args.python, timeout=args.timeout)
    for check in diagnosis.checks:
        print(check.line())
    if cpu_failed:
        print(f"verdict: --roofline cannot measure this machine's CPU roofs (failed: {', '.join(cpu_failed)})")
        return EXIT_FAIL
    if diagnosis.no_gpu:  # a CPU machine the CPU path is ready on: nothing failed, exit 0
        print("verdict: the CPU path is ready; no NVIDIA GPU here: --roofline-counter auto uses the analytic "
              "counter on this machine (exit 0)")
        return EXIT_OK
    print(diagnosis.verdict())
    return diagnosis.exit_code

