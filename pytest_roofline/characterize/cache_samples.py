"""Cache-level samples spread over the whole characterization, beside the sweeps' plateaus.

Why. On a VM whose cores are shared with other tenants, a core's L1 and L2 speed switches between modes for
seconds at a time (a 2-vCPU AMD EPYC Zen 5 VM: one thread's in-place update at 16 KiB had a median of 463-475
GB/s in some quarter-seconds and 319-354 in others, while its FMA peak varied by 1.7 % over eight
characterizations). A level's plateau comes from
the few milliseconds in which the sweep passed through that level's window, twice; when both passes fell in a
slow mode the roof read low (L1 643-1388 GB/s and L2 492-736 GB/s over eight cold characterizations). So at
each of the moments the DRAM samples are taken, every cache level is timed again at one working set in the
middle of its window (best of a few short calls, as a sweep point is), and those samples join the window's
sweep points before the plateau is chosen. The plateau rule (the highest value three points corroborate,
``plateaus.top_cluster``) then finds a level's fast mode whenever three moments of the run saw it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_roofline.characterize.clean import PassGuard
    from pytest_roofline.characterize.cpu_ert import SweepPoint


def sample_sizes(sizes: Sequence[int], windows: Mapping[str, tuple[float, float]]) -> dict[str, int]:
    """Per cache level (every window but main memory's), the sweep size nearest the geometric middle of its
    window; levels with no sweep size inside are left out."""
    chosen: dict[str, int] = {}
    for level, (low, high) in windows.items():
        if not level.startswith("L"):
            continue
        inside = [s for s in sizes if low <= s <= high]
        if inside:
            middle = math.sqrt(low * high)
            chosen[level] = min(inside, key=lambda s: abs(math.log(s / middle)))
    return chosen


@dataclass
class CacheSampler:
    """One sample per cache level and moment; ``measure(size)`` is a sweep point of the update kernel."""

    measure: Callable[[int], SweepPoint]
    sizes: dict[str, int]
    guard: PassGuard | None = None
    samples: dict[str, list[SweepPoint]] = field(default_factory=dict)
    moments_disturbed: list[str] = field(default_factory=list)

    def take(self) -> None:
        """Every level once; under a ``guard``, a moment in which other work ran beside us marks its samples
        not quiet (they then count only where a window has too few quiet points, as sweep points do)."""
        def one_each() -> list[tuple[str, SweepPoint]]:
            return [(level, self.measure(size)) for level, size in self.sizes.items()]

        if self.guard is None:
            taken, reason = one_each(), None
        else:
            taken, reason = self.guard.run(one_each)
        if reason is not None:
            self.moments_disturbed.append(reason)
            taken = [(level, replace(point, quiet=False)) for level, point in taken]
        for level, point in taken:
            self.samples.setdefault(level, []).append(point)

    def points(self) -> list[SweepPoint]:
        """Every sample, to join the sweep's points of the same kernel."""
        return [point for level in self.samples for point in self.samples[level]]

    def to_info(self, level: str) -> dict[str, object] | None:
        taken = self.samples.get(level)
        if not taken:
            return None
        return {"working_set_bytes": self.sizes[level], "bytes_per_s": [p.bandwidth for p in taken],
                "disturbed": sum(not (p.clean and p.quiet) for p in taken)}
