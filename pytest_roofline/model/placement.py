"""Which memory level serves counted bytes in the timed loop.

The analytic counter charges each op its compulsory traffic as if nothing stayed in cache between ops.
In the timed loop the same call repeats, so a region whose whole working set fits in a cache level is
served from that level, not from DRAM: judging it against DRAM bandwidth would give fractions above 1 and
hide cache regressions. A working set "fits" when it is at most three quarters of the level's capacity:
the same bound as the characterization's plateau window for that level (``plateaus.HIGH_FACTOR``), so a
working set is judged against the roof that was measured with working sets of its size. (With half, an
8 MiB add with a fresh output, 24 MiB in all beside a 32 MiB L3, was judged against DRAM while it ran
from L3 in most sessions, and read 1.2-1.7 of that roof.) Capacities come from
``Machine.info["capacities"]`` ({level: bytes}, aggregate over the cores in use), written by the
characterization or by hand in a pinned file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from pytest_roofline.model import KernelSample, Machine
from pytest_roofline.model.units import si

FIT_FRACTION = 0.75  # = characterize.plateaus.HIGH_FACTOR


def serving_level(footprint_bytes: float, machine: Machine) -> str | None:
    """The smallest level with a bandwidth roof whose capacity holds the working set, if any."""
    capacities = machine.info.get("capacities") or {}
    fitting = [
        (float(capacity), level)
        for level, capacity in capacities.items()
        if level in machine.bandwidth and footprint_bytes <= FIT_FRACTION * float(capacity)
    ]
    return min(fitting)[1] if fitting else None


def nearest_level(machine: Machine) -> str | None:
    """The cache level with the smallest capacity (L1), if capacities are known."""
    capacities = machine.info.get("capacities") or {}
    return min(capacities, key=lambda level: float(capacities[level])) if capacities else None


def place_working_set(
    kernels: Sequence[KernelSample], footprint_bytes: float, machine: Machine, from_level: str = "DRAM",
    write_allocate: Mapping[str, float] | None = None,
) -> tuple[list[KernelSample], str | None]:
    """Move bytes counted at ``from_level`` to the level that holds the working set; say so in a note.

    ``write_allocate`` (bytes per kernel name, included in its bytes) is taken out when that level is the
    nearest one (L1): a working set that stays in L1 between calls has its output lines there already, so
    stores hit and read nothing first; the L1 roof is counted without such reads too."""
    level = serving_level(footprint_bytes, machine)
    if level is None or level == from_level:
        return list(kernels), None
    extra = dict(write_allocate or {}) if level == nearest_level(machine) else {}
    moved = [
        replace(k, bytes={(level if name == from_level else name):
                          value - (extra.get(k.name, 0.0) if name == from_level else 0.0)
                          for name, value in k.bytes.items()})
        for k in kernels
    ]
    capacity = float(machine.info["capacities"][level])
    note = (f"working set {si(footprint_bytes, 'B')} fits in {level} ({si(capacity, 'B')}): counted bytes "
            f"are judged against {level} bandwidth, not {from_level}"
            + (" (stores hit there: no write-allocate reads)" if any(extra.values()) else ""))
    return moved, note
