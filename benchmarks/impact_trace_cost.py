"""What the change-impact trace costs a plain workload: time under ``CodeTrace`` / time without, side by side.

Two workloads: pure-Python calls (the worst case for a per-call hook) and a loop of small torch CPU ops. Each
round times both ways back to back, alternating which goes first, so machine drift hits both; the ratio of the
medians is printed per workload. The traced time includes the trace's start and stop. Exits nonzero when a
workload measured nothing or the trace did not see the workload's functions.

    python benchmarks/impact_trace_cost.py [--rounds 15] [--no-torch]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pytest_roofline.ab.code_trace import CodeTrace

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().relative_to(ROOT).as_posix()


def leaf(x: int) -> int:
    return x + 1


def branch(x: int) -> int:
    return leaf(x) + leaf(x + 1)


def python_calls() -> None:
    total = 0
    for i in range(40_000):
        total += branch(i)
    if total <= 0:
        raise AssertionError("the workload did not run")


def torch_loop() -> Callable[[], None]:
    import torch

    torch.set_num_threads(1)
    a, b = torch.rand(64, 64), torch.rand(64, 64)

    def torch_ops() -> None:
        c = a
        for _ in range(3_000):
            c = torch.add(c, b).mul_(0.5)
        if not bool(torch.isfinite(c).all()):
            raise AssertionError("the workload did not run")

    return torch_ops


def side_by_side(fn: Callable[[], None], rounds: int) -> tuple[list[float], list[float], set[tuple[str, str]]]:
    plain: list[float] = []
    traced: list[float] = []
    seen: set[tuple[str, str]] = set()
    fn()  # warm-up: imports, caches, allocator
    for i in range(rounds):
        for with_trace in ((False, True) if i % 2 == 0 else (True, False)):
            start = time.perf_counter()
            if with_trace:
                with CodeTrace(ROOT) as trace:
                    fn()
                traced.append(time.perf_counter() - start)
                seen |= trace.functions()
            else:
                fn()
                plain.append(time.perf_counter() - start)
    return plain, traced, seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--no-torch", action="store_true", help="time the pure-Python workload only")
    args = parser.parse_args()
    workloads: list[tuple[str, Callable[[], None], str]] = [("python calls", python_calls, "branch")]
    if not args.no_torch:
        try:
            workloads.append(("torch CPU ops", torch_loop(), "torch_loop.<locals>.torch_ops"))
        except ImportError as exc:
            print(f"torch is not importable ({exc}); run with --no-torch to time the Python workload only")
            return 2
    backend = "sys.monitoring" if sys.version_info >= (3, 12) else "sys.setprofile"
    print(f"Python {sys.version.split()[0]}, {backend}, {args.rounds} rounds; medians in ms")
    print(f"{'workload':<16}{'untraced':>10}{'traced':>10}{'ratio':>8}")
    failed = False
    for name, fn, function in workloads:
        plain, traced, seen = side_by_side(fn, args.rounds)
        if not plain or not traced or min(plain) <= 0 or (HERE, function) not in seen:
            print(f"{name}: measured nothing (samples {len(plain)}/{len(traced)}, trace saw {sorted(seen)})")
            failed = True
            continue
        untraced_ms, traced_ms = statistics.median(plain) * 1e3, statistics.median(traced) * 1e3
        print(f"{name:<16}{untraced_ms:>10.2f}{traced_ms:>10.2f}{traced_ms / untraced_ms:>8.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
