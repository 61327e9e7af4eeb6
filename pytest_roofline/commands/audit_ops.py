"""``python -m pytest_roofline audit-ops``: the arguments here, the work in :mod:`.audit` (imports torch)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--markdown", type=Path, help="write the coverage table and op lists to this file")
    parser.add_argument("--max-samples", type=int, default=4, help="sample inputs per OpInfo (default 4)")
    parser.add_argument("--budget", type=float, default=240.0, help="seconds for running samples (default 240)")


def run(args: argparse.Namespace) -> int:
    try:
        from pytest_roofline.counters.audit import audit_ops

        audit = audit_ops(args.max_samples, args.budget)
    except ImportError as exc:
        print(f"audit-ops needs PyTorch's test helpers: pip install 'pytest-roofline[audit]' ({exc})")
        return 2
    for group, share in audit.shares().items():
        print(f"{group:20s} {sum(g == group for g in audit.ops.values()):5d} overloads  {share:6.1%}")
    print(f"{len(audit.ops)} overloads from {audit.samples} samples of {audit.opinfos} OpInfos in "
          f"{audit.seconds:.0f} s (torch {audit.torch_version})")
    if args.markdown:
        from pytest_roofline._atomic import write_text_atomic

        write_text_atomic(args.markdown, audit.markdown())
        print(f"written to {args.markdown}")
    return 0
