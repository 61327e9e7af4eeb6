"""Huge pages by allocation history: is a memory-bound call's time set by what the process allocated before?

With the plugin's allocator settings (glibc mallopt: every block from the heap) and PyTorch's huge-page
allocation (``THP_MEM_ALLOC_ENABLE=1``: blocks of 2 MiB and more 2 MiB-aligned and advised), a 64 MiB
``dst.copy_(src)`` is timed on two pairs of buffers in one process: *fresh* ones (heap never touched before)
and *reused* ones (heap that many small tensors, below 2 MiB, first touched as 4 KiB pages and then freed).
The kernel backs an advised range with huge pages only where nothing is mapped yet, so the reused pair keeps
part of its 4 KiB pages. In an A/B comparison every twin of one side runs the same allocations before a call
site, so such a difference is shared by one side's twins rather than drawn per process pair
(docs/ab-compare.md, "eleventh round"). Prints, for each process, the huge pages each pair gained and the
copy's median time, then the reused ÷ fresh ratio; the order of the two alternates between processes.

    python benchmarks/heap_huge_pages.py [--processes 4] [--calls 60] [--no-thp]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r'''
import os, statistics, sys, time
sys.path.insert(0, {root!r})
from pytest_roofline.host.allocator import tune_malloc
tune_malloc()
import torch
torch.set_num_threads(1)
N, SMALL = 16 * 2**20, 200_000  # a 64 MiB fp32 buffer; 0.8 MB tensors, below the 2 MiB huge-page threshold


def huge_kib():
    with open("/proc/self/smaps_rollup") as f:
        return next((int(line.split()[1]) for line in f if line.startswith("AnonHugePages:")), 0)


def pair(reuse):
    if reuse:
        small = [torch.ones(SMALL) for _ in range(200)]  # 160 MB first touched on 4 KiB pages, then freed
        del small
    before = huge_kib()
    src, dst = torch.randn(N), torch.empty(N)
    dst.copy_(src)
    return src, dst, (huge_kib() - before) / 1024


def median_ms(src, dst, calls):
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


order = ("reused", "fresh") if {reused_first} else ("fresh", "reused")
pairs = {{name: pair(name == "reused") for name in order}}
for name in order:
    src, dst, gained = pairs[name]
    print(name, gained, median_ms(src, dst, {calls}), flush=True)
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--no-thp", action="store_true", help="without THP_MEM_ALLOC_ENABLE (4 KiB pages)")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    if not args.no_thp:
        env["THP_MEM_ALLOC_ENABLE"] = "1"
    ratios = []
    for n in range(args.processes):
        code = CHILD.format(root=str(ROOT), reused_first=n % 2 == 1, calls=args.calls)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        rows = {name: (float(gained), float(ms)) for name, gained, ms in (line.split() for line in
                                                                         out.stdout.splitlines())}
        ratio = rows["reused"][1] / rows["fresh"][1]
        ratios.append(ratio)
        print(f"process {n + 1}: fresh {rows['fresh'][0]:5.0f} MiB huge, {rows['fresh'][1]:.3f} ms; "
              f"reused {rows['reused'][0]:5.0f} MiB huge, {rows['reused'][1]:.3f} ms; reused / fresh {ratio:.3f}")
    print(f"reused / fresh, median over {len(ratios)} processes: {statistics.median(ratios):.3f} "
          f"({'4 KiB pages' if args.no_thp else 'THP_MEM_ALLOC_ENABLE=1'})")


if __name__ == "__main__":
    main()
