"""The DRAM roof from samples spread over the whole characterization, at one working set.

Why not the sweep's plateau, as for the caches. Main memory is shared with the host's other tenants, and its
bandwidth moves from second to second: on a 2-vCPU AMD EPYC Zen 4 VM (one core, five minutes, the update
kernel at 192 MiB once a second) single samples read between 34 and 60 GB/s and the
best of each 8 s window between 53.6 and 59.9, with no slower trend. A plateau is the highest value three
sweep points corroborate, and the DRAM window's points differ in size (4x to 8x the last cache; the smaller
ones still hit a little in a victim L3), so the roof jumped between about 55.5 and 59.3 GB/s from one cold
characterization to the next (CV 4.1 % over ten). Here the same kernels run single passes over one working
set (the sweep size nearest 6x the last cache), four per kernel at each of eight moments between the phases
of the characterization, and the roof is the faster kernel's median: a robust statistic over passes spread
in time. (The five minutes above, cut into 8 s spans of 8 samples, gave such a median a CV of 2.0 %.) What
it cannot remove is the host drifting over minutes: ten cold characterizations read 49.4-55.2 GB/s over
two minutes, three minutes after ten others with the same code had read 52.6-55.4.

The live DRAM probe (``measure/probes.py``) runs the update kernel at this working set and is calibrated by
the same median, so a probe that reads the median judges a call against the characterized roof exactly.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from pytest_roofline.characterize.plateaus import WRITE_ALLOCATE_FACTOR

if TYPE_CHECKING:
    from pytest_roofline.characterize.clean import PassGuard

SAMPLE_FACTOR = 6.0  # working set: the sweep size nearest this many times the last cache, inside the DRAM window
SAMPLES_PER_MOMENT = 4  # single passes per kernel and moment; the characterization takes them at 8 moments


class SampledLibrary(Protocol):
    """What the sampler needs (``cpu_ert.KernelRates``): the rate of one timed pass of each kernel."""

    def update_rate(self, working_set_bytes: int) -> float | None: ...  # None: the pass was disturbed

    def triad_rate(self, working_set_bytes: int) -> float | None: ...

    def scale_rate(self, working_set_bytes: int) -> float | None: ...

    def copy_rate(self, working_set_bytes: int) -> float | None: ...  # a library's copy, not this code's

    @property
    def copy_source(self) -> str: ...  # "torch-copy": which library copied


# Bytes the analytic counter charges per byte a kernel's pass times: the in-place update reads and writes each
# line it touches; the triad (3 words) and the scale (2 words) store to lines they do not read, which costs a
# write-allocate read beyond L1 (4/3 and 3/2).
COUNTED = {"update": 1.0, "triad": WRITE_ALLOCATE_FACTOR, "scale": 1.5, "copy": 1.5}


def sample_size(sizes: Sequence[int], window: tuple[float, float] | None, last_cache: int,
                granularity: int) -> int | None:
    """The sweep size inside the DRAM window nearest ``SAMPLE_FACTOR`` x the last cache, rounded down to a
    multiple of ``granularity`` (the stream kernels' arrays); None when the sweep does not reach DRAM."""
    if window is None:
        return None
    inside = [s for s in sizes if window[0] <= s <= window[1]]
    if not inside:
        return None
    target = SAMPLE_FACTOR * last_cache
    size = min(inside, key=lambda s: abs(math.log(s / target)))
    rounded = size // granularity * granularity
    return rounded if rounded >= window[0] else None


@dataclass
class DramSampler:
    """Samples of the update, triad and scale kernels at one DRAM working set, taken a few at a time."""

    library: SampledLibrary
    working_set_bytes: int
    update: list[float] = field(default_factory=list)  # bytes/s, read + write of every element
    triad: list[float] = field(default_factory=list)  # bytes/s as timed (3 words per element)
    scale: list[float] = field(default_factory=list)  # bytes/s as timed (2 words per element)
    copy: list[float] = field(default_factory=list)  # bytes/s as timed (2 words per element)
    disturbed: int = 0  # passes left out
    guard: PassGuard | None = None  # watches each moment's passes for other work on our cores
    moments_disturbed: list[str] = field(default_factory=list)

    def take(self, count: int = SAMPLES_PER_MOMENT) -> None:
        """``count`` passes of each kernel; passes a descheduled thread disturbed are left out, and every pass
        of a moment in which other work or the hypervisor took our cores (``guard``)."""
        def passes() -> list[list[float | None]]:
            return [[getattr(self.library, f"{kernel}_rate")(self.working_set_bytes) for _ in range(count)]
                    for kernel in COUNTED]

        if self.guard is None:
            taken = passes()
        else:
            taken, reason = self.guard.run(passes)
            if reason is not None:
                self.moments_disturbed.append(reason)
                taken = [[None] * len(rates) for rates in taken]
        for kernel, rates in zip(COUNTED, taken):
            getattr(self, kernel).extend(rate for rate in rates if rate is not None)
            self.disturbed += sum(rate is None for rate in rates)

    def kernel_roof(self, kernel: str) -> float | None:
        """A kernel's median, counted as the analytic counter counts its bytes (``COUNTED``)."""
        values: list[float] = getattr(self, kernel)
        return statistics.median(values) * COUNTED[kernel] if values else None

    def update_roof(self) -> float | None:
        return self.kernel_roof("update")

    def triad_roof(self) -> float | None:
        """Counted as the analytic counter counts a triad's bytes: with the write-allocate read."""
        return self.kernel_roof("triad")

    def scale_roof(self) -> float | None:
        return self.kernel_roof("scale")

    def roof(self) -> tuple[float, str] | None:
        """The fastest kernel's median, and that kernel's name: a roof is the best a streaming kernel reaches,
        and which one that is depends on the core (the scale beat the update by 4 % on a Zen 5 VM)."""
        candidates = [(value, self.source(kernel)) for kernel in COUNTED if (value := self.kernel_roof(kernel))]
        return max(candidates) if candidates else None

    def source(self, kernel: str) -> str:
        """``ert-update``, ``ert-triad``, ``ert-scale``: this library's kernels; ``torch-copy``: the library's copy."""
        return self.library.copy_source if kernel == "copy" else f"ert-{kernel}"

    def to_info(self) -> dict[str, object]:
        return {"working_set_bytes": self.working_set_bytes, "statistic": "median",
                "update_bytes_per_s": self.update_roof(), "triad_bytes_per_s": self.triad_roof(),
                "scale_bytes_per_s": self.scale_roof(), "copy_bytes_per_s": self.kernel_roof("copy"),
                "copy_source": self.library.copy_source,
                "update_samples": self.update, "triad_samples": self.triad, "scale_samples": self.scale,
                "copy_samples": self.copy,
                "disturbed_samples": self.disturbed, "moments_disturbed": self.moments_disturbed}
