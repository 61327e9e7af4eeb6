"""Does a probe at a call's own working-set size track an L3-edge call across processes?

Each of ``--processes`` fresh processes (cores alternating) times, for ``--seconds``, an add of two 8 MiB fp32
tensors into a fresh output (24 MiB: the edge of a 32 MiB L3) and the ERT update kernel over the sweep size
nearest 24 MiB, in turn, on one core and one thread, with the plugin's tuned malloc and huge pages. Printed
per process: the probe's median rate, the add's median rate and add ÷ probe. If the ratio holds while the add
moves, a probe taken beside the call cancels what moved it (the footprint probe of ``measure/probes.py``).

    python benchmarks/edge_probe_tracking.py [--processes 6] [--seconds 6] [--mib 24]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def one_process(core: int, mib: int, seconds: float) -> dict[str, float]:
    os.sched_setaffinity(0, {core})
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    import torch

    from pytest_roofline.characterize import cpu_ert
    from pytest_roofline.characterize import machine as machine_api
    from pytest_roofline.host.allocator import tune_malloc

    tune_malloc()
    torch.set_num_threads(1)
    machine = machine_api.characterize("cpu", progress=lambda message: None)
    kernel = machine.info["kernel"]
    libraries = {int(bits) // 8: Path(path) for bits, path in kernel["libraries"].items()}
    rows = machine.info["sweep"]["update"]
    size = min((r["working_set_bytes"] for r in rows), key=lambda b: abs(b - (mib << 20)))
    library = cpu_ert.ErtLibrary(libraries, int(kernel["chains"]), 1, size)
    width = max(libraries)
    library.fill("fp64")

    def probe() -> float:
        library.run("fp64", width, 1, size, 1)  # untimed: the sweep's steady state, not a cold buffer
        return 2 * 2 * size / library.run("fp64", width, 1, size, 2)[0]

    n = (8 << 20) // 4
    a, b = torch.randn(n), torch.randn(n)
    probes, calls = [], []
    end = time.time() + seconds
    while time.time() < end:
        probes.append(probe())
        a + b  # untimed: the add's data back in cache after the probe
        for _ in range(5):
            start = time.perf_counter()
            a + b
            calls.append(time.perf_counter() - start)
    add = 3 * 4 * n / statistics.median(calls)
    return {"core": core, "probe_bytes_per_s": statistics.median(probes), "add_bytes_per_s": add}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--mib", type=int, default=24, help="probe size (the add's working set is 24 MiB)")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(one_process(args.child, args.mib, args.seconds)))
        return
    cores = sorted(os.sched_getaffinity(0))
    ratios, adds = [], []
    print(f"{'process':>7s} {'core':>4s} {'probe GB/s':>10s} {'add GB/s':>9s} {'add/probe':>9s}")
    for index in range(args.processes):
        core = cores[index % len(cores)]
        out = subprocess.run([sys.executable, __file__, "--child", str(core), "--mib", str(args.mib),
                              "--seconds", str(args.seconds)], check=True, capture_output=True, text=True).stdout
        row = json.loads(out.strip().splitlines()[-1])
        ratio = row["add_bytes_per_s"] / row["probe_bytes_per_s"]
        ratios.append(ratio)
        adds.append(row["add_bytes_per_s"])
        print(f"{index + 1:7d} {core:4d} {row['probe_bytes_per_s'] / 1e9:10.1f} {row['add_bytes_per_s'] / 1e9:9.1f} "
              f"{ratio:9.3f}")
    if len(adds) > 1:
        print(f"CV over processes: add {statistics.stdev(adds) / statistics.fmean(adds):.1%}, add/probe "
              f"{statistics.stdev(ratios) / statistics.fmean(ratios):.1%}")


if __name__ == "__main__":
    main()
