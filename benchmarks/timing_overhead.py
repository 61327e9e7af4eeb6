"""Timing overhead: the plugin's measured step time / a bare ``time.perf_counter`` median, side by side.

Target: 1.00 +/- 0.03. Both measurements time the same callable in the same process, interleaved, so
machine drift hits both; the ratio of their medians is printed per workload.

    python benchmarks/timing_overhead.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from pytest_roofline.measure.regions import Recorder
from pytest_roofline.measure.timing import TimingPolicy
from pytest_roofline.model import Machine

# Ceilings only matter for the verdict, which this benchmark ignores.
MACHINE = Machine("benchmark", {"fp32": 1e11, "fp64": 5e10, "bf16": 2e11}, {"DRAM": 2e10})


def bare_median(fn: Callable[[], Any], calls: int) -> float:
    for _ in range(5):
        fn()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def plugin_median(fn: Callable[[], Any], counter: Callable[[], Any], max_time_s: float) -> tuple[float, int, Any]:
    """The plugin's median, and the measured call's result: the caller keeps it alive while timing bare,
    because whether a large output is still held changes the allocator's state (glibc returns freed
    mmap-sized blocks to the OS, and the next calls page-fault) by up to 1.6x for a 1.6 MB conv output."""
    recorder = Recorder(enabled=True, machine=lambda: MACHINE, counter=counter,
                        policy=TimingPolicy(max_time_s=max_time_s))
    result = recorder.measure(fn)
    region = recorder.regions[-1]
    return region.timing.median_s, region.timing.rounds, result


def workloads() -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    import numpy as np

    from pytest_roofline.counters.declared import DeclaredCounter

    a = np.random.default_rng(0).standard_normal((384, 384))
    out: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        "numpy matmul 384 (declared)": (lambda: a @ a, lambda: DeclaredCounter({"fp64": 2 * 384**3}, {})),
    }
    try:
        import torch

        from pytest_roofline.counters.analytic import AnalyticCounter
    except ImportError:
        return out
    x = torch.randn(8, 64, 28, 28)
    conv = torch.nn.Conv2d(64, 64, 3, padding=1)
    big = torch.randn(1 << 20)
    lstm = torch.nn.LSTM(128, 128)
    seq = torch.randn(20, 8, 128)
    inference = torch.no_grad()  # forward passes only: no autograd graph kept between calls
    out["conv2d 64->64 3x3 N=8 28x28 fwd"] = (inference(lambda: conv(x)), AnalyticCounter)
    out["relu 4 MB"] = (inference(lambda: torch.relu(big)), AnalyticCounter)
    out["LSTM 128, T=20, B=8 fwd"] = (inference(lambda: lstm(seq)), AnalyticCounter)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved bare/plugin pairs per workload")
    parser.add_argument("--max-time", type=float, default=0.5, help="plugin timing budget per measurement (s)")
    args = parser.parse_args()
    print(f"{'workload':40s} {'bare median':>12s} {'plugin median':>14s} {'ratio':>7s}  (pairs, rounds)")
    ratios = []
    for name, (fn, counter) in workloads().items():
        bare, plugin, rounds = [], [], 0
        for _ in range(args.repeats):
            plugin_s, rounds, result = plugin_median(fn, counter, args.max_time)
            bare.append(bare_median(fn, max(rounds, 5)))
            del result
            plugin.append(plugin_s)
        ratio = statistics.median(plugin) / statistics.median(bare)
        ratios.append(ratio)
        print(f"{name:40s} {statistics.median(bare) * 1e6:10.1f}us {statistics.median(plugin) * 1e6:12.1f}us "
              f"{ratio:7.3f}  ({args.repeats}, {rounds})")
    print(f"{'median ratio over workloads':40s} {'':12s} {'':14s} {statistics.median(ratios):7.3f}  "
          f"target 1.00 +/- 0.03")


if __name__ == "__main__":
    main()
