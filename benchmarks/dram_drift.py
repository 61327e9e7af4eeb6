"""DRAM drift: how main memory's bandwidth moves within a characterization and from minute to minute.

One process on one core times the characterization's own DRAM kernels (the ERT triad, counted with its
write-allocate read as the DRAM roof is, and the ERT in-place update) at 6x the last cache, every
``--every`` seconds for ``--minutes``; each sample is the best of three calls, as a sweep point is. It then
splits the timeline into windows as long as a cold characterization (``--window`` s) and prints the spread of
the best value inside each window against the spread of the windows' best values. When the windows' bests
spread as much as single samples, the bandwidth itself moves on the scale of minutes, and no statistic over
the passes of one characterization can make the DRAM roof reproducible: only a probe measured beside the
work (``--roofline-probe live``) takes that drift out of a fraction.

    python benchmarks/dram_drift.py [--minutes 4] [--every 1] [--window 8] [--core 1]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from pytest_roofline.characterize import arch, cpu_ert
from pytest_roofline.characterize.build import accepts_flag, find_compiler
from pytest_roofline.characterize.cache_sizes import os_cache_sizes
from pytest_roofline.characterize.fingerprint import cpu_flags, cpu_model
from pytest_roofline.characterize.plateaus import WRITE_ALLOCATE_FACTOR


def cv(values: list[float]) -> float:
    return 100 * statistics.pstdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=4.0)
    parser.add_argument("--every", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("--window", type=float, default=8.0, help="seconds of one cold characterization")
    parser.add_argument("--core", type=int, default=None, help="pin to this core (default: the last one)")
    args = parser.parse_args()
    core = args.core if args.core is not None else max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    compiler = find_compiler() or "cc"
    isa = cpu_flags()
    flags = arch.select(platform.machine(), isa, lambda flag: accepts_flag(compiler, flag), arch.sve_vector_bytes())
    widest = max(flags.widths)
    caches = os_cache_sizes()
    size = 6 * (caches[max(caches)] if caches else 32 * 1024**2)
    with tempfile.TemporaryDirectory() as build:
        library = cpu_ert.ErtLibrary.build(Path(build), cpu_ert.chains_for(isa), 1, size, flags.widths, flags.flags)
        granularity = 3 * library.granularity_bytes()
        triad_size = size // granularity * granularity
        rows: list[tuple[float, float, float]] = []
        start = time.perf_counter()
        while time.perf_counter() - start < 60 * args.minutes:
            tick = time.perf_counter()
            triad = cpu_ert.measure_triad(library, widest, triad_size, target_seconds=0.001, repeats=3)
            update = cpu_ert.measure(library, "fp64", widest, 1, size, target_seconds=0.001, repeats=3)
            rows.append((tick - start, triad.bandwidth * WRITE_ALLOCATE_FACTOR / 1e9, update.bandwidth / 1e9))
            time.sleep(max(0.0, args.every - (time.perf_counter() - tick)))
    print(f"{'t (s)':>7}{'triad+WA GB/s':>15}{'update GB/s':>13}")
    for t, triad_bw, update_bw in rows:
        print(f"{t:7.1f}{triad_bw:15.2f}{update_bw:13.2f}")
    for column, name in ((1, "triad + write-allocate"), (2, "update")):
        values = [row[column] for row in rows]
        windows: dict[int, list[float]] = {}
        for row in rows:
            windows.setdefault(int(row[0] // args.window), []).append(row[column])
        bests = [max(w) for w in windows.values() if len(w) >= 2]
        inside = [cv(w) for w in windows.values() if len(w) >= 2]
        print(f"\n{name}: {len(values)} samples, {min(values):.1f}-{max(values):.1f} GB/s, CV {cv(values):.1f} %")
        print(f"  best of each {args.window:.0f} s window ({len(bests)} windows): {min(bests):.1f}-{max(bests):.1f} "
              f"GB/s, CV {cv(bests):.1f} %; median CV inside a window {statistics.median(inside):.1f} %")
    print(f"\nCPU: {cpu_model()}, core {core}, DRAM working set {size / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
