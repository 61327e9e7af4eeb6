"""Cache-level samples spread over the whole characterization, beside the sweeps' plateaus.

Why. On a VM whose cores are shared with other tenants, a core's L1 and L2 speed switches between modes for
seconds at a time (an L1 update by a third between quarter-seconds, while the core's FMA peak holds within
a few percent: docs/characterization-under-load.md). A level's plateau comes from
the few milliseconds in which the sweep passed through that level's window, twice; when both passes fell in a
slow mode the roof read low (L1 643-1388 GB/s and L2 492-736 GB/s over eight cold characterizations). So at
each of the moments the DRAM samples are taken, every cache level is timed again at one working set in the
middle of its window (best of a few short calls, as a sweep point is), and those samples join the window's
sweep points before the plateau is chosen. The plateau rule (the highest value three points corroborate,
``plateaus.top_cluster``) then finds a level's fast mode whenever three moments of the run saw it.

A roof is an upper bound, so each moment also times an independent kernel at the levels beyond the nearest:
the library's own copy (torch ``copy_``, numpy ``copyto`` without torch), counted as the analytic counter
counts a copy there (with the write-allocate read). Its call overhead only ever makes it read slower, so a
level whose copy median beats the roof by more than ``BEAT_MARGIN`` has a roof that is low, whatever the
cause: the characterization raises it to the copy's and says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pytest_roofline.characterize.dram_samples import COUNTED

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


BEAT_MARGIN = 0.05  # a copy this far above a level's roof: the roof is low (not timing noise of a few %)
COPY_CALLS = 3  # copies per level and moment, the fastest kept (a sweep point is the best of a few calls too)


@dataclass
class CacheSampler:
    """One sample per cache level and moment; ``measure(size)`` is a sweep point of the update kernel.
    ``copy(size)``: a library's copy at that working set, bytes/s as timed (``cpu_ert.KernelRates.copy_rate``;
    None: disturbed), taken at ``copy_levels``, after the update samples (it overwrites the buffer)."""

    measure: Callable[[int], SweepPoint]
    sizes: dict[str, int]
    guard: PassGuard | None = None
    samples: dict[str, list[SweepPoint]] = field(default_factory=dict)
    moments_disturbed: list[str] = field(default_factory=list)
    copy: Callable[[int], float | None] | None = None
    copy_levels: tuple[str, ...] = ()
    copy_source: str | None = None  # "torch-copy", "numpy-copy"
    copies: dict[str, list[float]] = field(default_factory=dict)  # counted bytes/s, one per quiet moment

    def take(self) -> None:
        """Every level once; under a ``guard``, a moment in which other work ran beside us marks its samples
        not quiet (they then count only where a window has too few quiet points, as sweep points do)."""
        def one_each() -> tuple[list[tuple[str, SweepPoint]], list[tuple[str, float]]]:
            updates = [(level, self.measure(size)) for level, size in self.sizes.items()]
            return updates, self._copies()

        if self.guard is None:
            (taken, copied), reason = one_each(), None
        else:
            (taken, copied), reason = self.guard.run(one_each)
        if reason is not None:
            self.moments_disturbed.append(reason)
            taken = [(level, replace(point, quiet=False)) for level, point in taken]
            copied = []  # only a quiet moment's copy may raise a roof
        for level, point in taken:
            self.samples.setdefault(level, []).append(point)
        for level, rate in copied:
            self.copies.setdefault(level, []).append(rate)

    def _copies(self) -> list[tuple[str, float]]:
        if self.copy is None:
            return []
        found = []
        for level in self.copy_levels:
            rates = [r for _ in range(COPY_CALLS) if (r := self.copy(self.sizes[level])) is not None]
            if rates:
                found.append((level, max(rates) * COUNTED["copy"]))
        return found

    def copy_roof(self, level: str) -> float | None:
        """The median of a level's copies, counted as the analytic counter counts a copy's bytes."""
        rates = self.copies.get(level)
        return statistics.median(rates) if rates else None

    def beats(self, level: str, roof: float) -> float | None:
        """The copy's median where it is more than ``BEAT_MARGIN`` above ``roof``: that roof is low."""
        copied = self.copy_roof(level)
        return copied if copied is not None and copied > roof * (1.0 + BEAT_MARGIN) else None

    def points(self) -> list[SweepPoint]:
        """Every sample, to join the sweep's points of the same kernel."""
        return [point for level in self.samples for point in self.samples[level]]

    def to_info(self, level: str) -> dict[str, object] | None:
        taken = self.samples.get(level)
        if not taken:
            return None
        info: dict[str, object] = {"working_set_bytes": self.sizes[level], "bytes_per_s": [p.bandwidth for p in taken],
                                   "disturbed": sum(not (p.clean and p.quiet) for p in taken)}
        if level in self.copy_levels:
            info.update(copy_source=self.copy_source, copy_bytes_per_s=self.copies.get(level, []),
                        copy_median_bytes_per_s=self.copy_roof(level))
        return info
