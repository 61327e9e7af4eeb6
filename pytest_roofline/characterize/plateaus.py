"""Bandwidth plateaus from a working-set sweep, labelled with the memory level they belong to.

The operating system says how big each cache is; the sweep says where bandwidth is actually flat. Each level
gets a window of working sets that should be served from it, using the aggregate capacity the threads can
use (private caches add up, shared ones do not):

    L1:   smallest .. 0.75 x C1
    Lk:   1.25 x C(k-1) .. 0.75 x Ck
    DRAM: 4 x C(last) .. largest

Inside a window the plateau is the highest bandwidth that at least ``support`` points corroborate (they
lie within ``tolerance`` below or above it). Noise on a shared machine only ever slows a kernel down, so
the fastest reproducible value is the best estimate of the hardware; a single fast outlier cannot set a
roof on its own, and taking the top rather than the mean copes with levels whose usable size is smaller
than the nominal one (a VM's slice of L3 falls off long before 0.75 x C3).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

LOW_FACTOR = 1.25   # start a window this far past the previous level, out of its tail
HIGH_FACTOR = 0.75  # end it before the level itself starts to spill
# Main memory only once the working set is 4x the last cache: between 2x and 4x a one-core sweep still hit in a
# 32 MiB L3 (Zen 4 VM: 69 GB/s at 64 MiB falling to 55 at 152 MiB and flat after), and which of those sizes
# made the plateau moved the DRAM roof by up to 15 % between characterizations.
DRAM_FACTOR = 4.0
TOLERANCE = 0.05
MAX_SUPPORT = 3


@dataclass(frozen=True)
class Plateau:
    level: str
    bytes_per_s: float
    window: tuple[float, float]
    points: int  # how many sweep points agree with the plateau value
    first_bytes: int  # smallest and largest working set among them
    last_bytes: int


def aggregate_capacities(cache_sizes: Mapping[int, int], sharing: Mapping[int, int], threads: int) -> dict[int, int]:
    """Bytes of each cache level all ``threads`` can use together (one instance per ``sharing`` CPUs)."""
    capacities: dict[int, int] = {}
    for level, size in sorted(cache_sizes.items()):
        cpus_per_instance = max(1, sharing.get(level, 1))
        instances = max(1, math.ceil(threads / cpus_per_instance))
        capacities[level] = size * instances
    return capacities


def level_windows(capacities: Mapping[int, int], smallest: float, largest: float,
                  main_memory: str = "DRAM") -> dict[str, tuple[float, float]]:
    """Working-set window per level name, in level order; levels whose window is empty are left out."""
    windows: dict[str, tuple[float, float]] = {}
    previous = None
    for level, capacity in sorted(capacities.items()):
        low = smallest if previous is None else LOW_FACTOR * previous
        high = HIGH_FACTOR * capacity
        if high >= low:
            windows[f"L{level}"] = (low, high)
        previous = capacity
    low = DRAM_FACTOR * previous if previous is not None else smallest
    if largest >= low:
        windows[main_memory] = (low, largest)
    return windows


def top_cluster(values: Sequence[float], tolerance: float = TOLERANCE,
                support: int | None = None) -> tuple[float, list[int]]:
    """The highest value at least ``support`` values corroborate, as (that value, indices of its cluster).

    ``support`` defaults to 3, or half the values (rounded up) when there are fewer than 6. Where no value has
    that many (a host that moved during the sweep), the highest value a pair corroborates; where not even a
    pair agrees, the median. Never a lone fastest value: on the 2-vCPU Zen 3 VM a triad L1 window of
    287, 550, 483, 485, 341, 345, 370, 391, 404 GB/s once made 550 the L1 roof (likwid-bench and every other
    record: 330-413).
    """
    if not values:
        raise ValueError("no values")
    need = support if support is not None else min(MAX_SUPPORT, max(1, math.ceil(len(values) / 2)))
    for enough in range(need, min(need, 2) - 1, -1):
        for candidate in sorted(values, reverse=True):
            members = [i for i, v in enumerate(values) if abs(v - candidate) <= tolerance * candidate]
            if len(members) >= enough:
                return candidate, members
    order = sorted(range(len(values)), key=lambda i: values[i])
    middle = order[(len(order) - 1) // 2]  # the lower median: a value that was measured
    return values[middle], [middle]


def extract_plateaus(working_sets: Sequence[int], bandwidths: Sequence[float],
                     windows: Mapping[str, tuple[float, float]]) -> dict[str, Plateau]:
    """One plateau per level window that holds at least one sweep point."""
    if len(working_sets) != len(bandwidths):
        raise ValueError("working_sets and bandwidths differ in length")
    plateaus: dict[str, Plateau] = {}
    for level, (low, high) in windows.items():
        inside = [i for i, size in enumerate(working_sets) if low <= size <= high]
        if not inside:
            continue
        value, members = top_cluster([bandwidths[i] for i in inside])
        sizes = [working_sets[inside[m]] for m in members]
        plateaus[level] = Plateau(level, value, (low, high), len(members), min(sizes), max(sizes))
    return plateaus


WRITE_ALLOCATE_FACTOR = 4 / 3  # a triad moves 2 reads + 1 write per element, and a read of the written line


def with_write_allocate(found: Mapping[str, Plateau]) -> dict[str, Plateau]:
    """Triad plateaus counted as the analytic counter counts bytes: beyond the nearest level (L1) a store to a
    line the kernel does not read reads that line first (write-allocate), so 4 words move per element, not 3.
    In L1 the written lines stay resident between passes and stores hit: counted as measured."""
    return {level: plateau if level == "L1"
            else replace(plateau, bytes_per_s=plateau.bytes_per_s * WRITE_ALLOCATE_FACTOR)
            for level, plateau in found.items()}
