"""Do our own roof kernels move with compute-bound PyTorch calls across processes? (Why those get no probe.)

Each of ``--processes`` fresh processes, on one core (``--core``) and one thread, alternates for ``--seconds``
between the ERT kernels the characterization built (fp32 FMA in L1, the update kernel at 256 KiB and at
12 MiB) and two compute-bound calls: the held-out 1024² fp32 GEMM and conv2d. Printed: each one's median rate
per process, then per series its CV over processes, and for the GEMM and the conv their correlation with
each probe and the CV of call ÷ probe. A probe worth taking beside a call is one whose ratio to it holds
while both move.

    python benchmarks/compute_probe_tracking.py [--processes 10] [--seconds 5] [--core 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

PROBES = ("fma_fp32_l1", "update_256k", "update_12m")
CALLS = ("gemm", "conv")


def one_process(core: int, seconds: float) -> dict[str, float]:
    os.sched_setaffinity(0, {core})
    import torch

    from pytest_roofline.characterize import cpu_ert
    from pytest_roofline.characterize import machine as machine_api
    from pytest_roofline.host.allocator import tune_malloc

    tune_malloc()
    torch.set_num_threads(1)
    machine = machine_api.characterize("cpu", progress=lambda message: None)
    kernel = machine.info["kernel"]
    libraries = {int(bits) // 8: Path(path) for bits, path in kernel["libraries"].items()}
    width = max(libraries)
    memory = cpu_ert.ErtLibrary(libraries, int(kernel["chains"]), 1, 12 << 20)
    memory.fill("fp64")
    compute = cpu_ert.ErtLibrary(libraries, int(kernel["chains"]), 1, 64 << 10)
    compute.fill("fp32")
    grain = memory.granularity_bytes()

    def update(size: int) -> float:
        size = size // grain * grain
        memory.run("fp64", width, 1, size, 1)  # untimed: the sweep's steady state
        return 2 * 2 * size / memory.run("fp64", width, 1, size, 2)[0]

    def fma() -> float:
        size = (16 << 10) // grain * grain
        flops_per_element = 256
        return (size // 4) * flops_per_element * 100 / compute.run("fp32", width, flops_per_element, size, 100)[0]

    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    conv = torch.nn.Conv2d(32, 64, 3, padding=1).eval()
    x = torch.randn(4, 32, 64, 64)

    def seconds_of(fn: Callable[[], object]) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    series: dict[str, list[float]] = {name: [] for name in (*PROBES, *CALLS)}
    with torch.no_grad():
        for _ in range(3):
            seconds_of(lambda: torch.mm(a, b))
            seconds_of(lambda: conv(x))
        end = time.time() + seconds
        while time.time() < end:
            series["fma_fp32_l1"].append(fma())
            series["update_256k"].append(update(256 << 10))
            series["update_12m"].append(update(12 << 20))
            for _ in range(3):
                series["gemm"].append(2 * 1024**3 / seconds_of(lambda: torch.mm(a, b)))
                series["conv"].append(1 / seconds_of(lambda: conv(x)))
    return {name: statistics.median(values) for name, values in series.items()}


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_process(args.core, args.seconds)))
        return
    rows = []
    names = (*PROBES, *CALLS)
    print("per process, median rates (probes GB/s or GFLOP/s, gemm GFLOP/s, conv calls/s):")
    print(" ".join(f"{name:>12s}" for name in names))
    for _ in range(args.processes):
        out = subprocess.run([sys.executable, __file__, "--child", "--core", str(args.core), "--seconds",
                              str(args.seconds)], check=True, capture_output=True, text=True).stdout
        row = json.loads(out.strip().splitlines()[-1])
        rows.append(row)
        print(" ".join(f"{row[name] / (1 if name == 'conv' else 1e9):12.1f}" for name in names), flush=True)
    if len(rows) < 3:
        return
    print("\nCV over processes: " + ", ".join(f"{name} {cv([r[name] for r in rows]):.1%}" for name in names))
    for call in CALLS:
        for probe in PROBES:
            calls, probes = [r[call] for r in rows], [r[probe] for r in rows]
            print(f"{call} vs {probe}: correlation {statistics.correlation(calls, probes):.2f}, "
                  f"{call} / {probe} CV {cv([c / p for c, p in zip(calls, probes, strict=True)]):.1%}")


if __name__ == "__main__":
    main()
