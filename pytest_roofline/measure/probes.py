"""Live roof probes: measure the DRAM roof again while a call site is timed, and judge each call against it.

Why only DRAM. Over repeated cold characterizations of a shared VM, every compute roof and every cache roof
holds within about 1 % (CV), while the DRAM roof moves several percent on one core and up to twice over on
all cores (docs/noise.md): main memory is shared with the host's other tenants, and what it gives changes
from one minute to the next. A cached DRAM roof then moves
every memory-bound fraction with it. So a region whose bytes are judged at DRAM is timed *beside* the roof:
before its timed calls, the kernel that set the roof (ERT's in-place update, one pass over a working set in
the DRAM window) runs once, and each call is judged against the DRAM bandwidth of the probe nearest before it,

    live roof_i = characterized roof x probe rate_i / probe rate at characterization

(the probe's working set is the one the characterization sampled DRAM at, and the calibration is the
update kernel's median rate there; an older characterization without samples: the smallest size of its
sweep's DRAM plateau, calibrated by that sweep point). Noise that slows the machine's memory slows the probe
alike and cancels in the ratio (duet benchmarking, Bulej et al. 2020). Probes run outside the timed intervals, on
the same cores with the same thread count (inside the call site's core placement), and only as often as the calls'
own time allows: a probe waits until the calls since the last one took at least as long as it did, so probing at
most doubles a call site's measurement time.

Only working sets of at least twice the last cache are probed: a probe sweeps every cache, so between two
calls whose data could stay in cache it would change what is measured.

Plain Python (numpy and the compiled ERT library the characterization built; no pytest, no torch).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol, TypedDict

from pytest_roofline.model import KernelSample, Machine, MissingCeilingError, evaluate_region

PROBE_MODES = ("live", "off")
PROBE_LEVEL = "DRAM"
CACHE_MULTIPLE = 2  # a footprint at least this many times the last cache cannot stay in cache between calls


@dataclass(frozen=True)
class ProbeSpec:
    """What the characterization left for a DRAM probe: its kernel library, working set and calibration."""

    libraries: Mapping[int, str]  # vector bytes -> compiled ERT library
    chains: int
    threads: int
    working_set_bytes: int
    calibration_bytes_per_s: float  # the update sweep's rate at that working set
    roof_bytes_per_s: float  # the characterized roof of ``level``
    level: str = PROBE_LEVEL  # the memory level whose roof the probe scales
    # The probe evicts what the call site keeps in cache between calls: one untimed call after each probe
    # puts it back, so every timed call starts from the state the unprobed loop would have.
    rewarm: bool = False

    @classmethod
    def from_machine(cls, machine: Machine) -> ProbeSpec | None:
        """The probe for this machine's DRAM roof, or None where it cannot be had (pinned or GPU roofs, the
        library fallback, a roof not set by the update kernel's sweep, libraries deleted since)."""
        info = machine.info
        kernel, levels = info.get("kernel") or {}, info.get("levels") or {}
        level = levels.get(PROBE_LEVEL) or {}
        rows = ((info.get("sweep") or {}).get("update")) or []
        roof = machine.bandwidth.get(PROBE_LEVEL)
        libraries = {int(bits) // 8: path for bits, path in (kernel.get("libraries") or {}).items()}
        if not (roof and libraries and level.get("plateau_bytes") and rows and kernel.get("threads")):
            return None
        if not all(Path(path).is_file() for path in libraries.values()):
            return None
        chains, threads = int(kernel.get("chains") or 8), int(kernel["threads"])
        samples = level.get("samples") or {}
        if samples.get("update_bytes_per_s") and samples.get("working_set_bytes"):
            # The roof is the median of DRAM samples spread over the characterization (characterize/
            # dram_samples.py); the update kernel's median at that working set is the probe's calibration.
            return cls(libraries, chains, threads, int(samples["working_set_bytes"]),
                       float(samples["update_bytes_per_s"]), float(roof))
        low, high = level["plateau_bytes"]  # a characterization from before the samples: its sweep's plateau
        inside = [r for r in rows if low <= r["working_set_bytes"] <= high]
        if not inside:
            return None
        point = inside[0]  # the smallest plateau size: the cheapest probe that still streams from DRAM
        return cls(libraries, chains, threads, int(point["working_set_bytes"]), float(point["bytes_per_s"]),
                   float(roof))


    @classmethod
    def at_footprint(cls, machine: Machine, level: str, footprint_bytes: float) -> ProbeSpec | None:
        """A probe of the memory system at the call site's own working-set size: the update sweep's point
        nearest to ``footprint_bytes`` (sweep points are about 1.19x apart), calibrated by that point's rate and
        scaling the roof of ``level``. For working sets at the edge of the last cache, whose speed depends on
        how much of that cache the host's other tenants leave them; the data is put back after each probe."""
        info = machine.info
        kernel = info.get("kernel") or {}
        rows = ((info.get("sweep") or {}).get("update")) or []
        roof = machine.bandwidth.get(level)
        libraries = {int(bits) // 8: path for bits, path in (kernel.get("libraries") or {}).items()}
        if not (roof and libraries and rows and kernel.get("threads") and footprint_bytes > 0):
            return None
        if not all(Path(path).is_file() for path in libraries.values()):
            return None
        point = min(rows, key=lambda r: abs(math.log(r["working_set_bytes"] / footprint_bytes)))
        return cls(libraries, int(kernel.get("chains") or 8), int(kernel["threads"]), int(point["working_set_bytes"]),
                   float(point["bytes_per_s"]), float(roof), level=level, rewarm=True)


@dataclass
class DramProbe:
    """Runs the probe kernel; built once per core count and reused by every call site of the session."""

    spec: ProbeSpec
    run_once: Callable[[], float]  # seconds of one pass over the working set (read + write of every element)

    @classmethod
    def build(cls, spec: ProbeSpec) -> DramProbe:
        from pytest_roofline.characterize import cpu_ert

        library = cpu_ert.ErtLibrary({w: Path(p) for w, p in spec.libraries.items()}, spec.chains, spec.threads,
                                     spec.working_set_bytes)
        width = max(spec.libraries)
        library.fill("fp64")

        def run_once() -> float:
            if not spec.rewarm:  # a DRAM-sized buffer: one pass streams from memory whatever came before
                return library.run("fp64", width, 1, spec.working_set_bytes, 1)[0]
            # A cache-sized buffer: after the call site's own calls it starts cold, while its calibration (the
            # sweep) is a steady state; one untimed pass first, then two timed, as the sweep ran it.
            library.run("fp64", width, 1, spec.working_set_bytes, 1)
            return library.run("fp64", width, 1, spec.working_set_bytes, 2)[0] / 2

        return cls(spec, run_once)

    def rate(self) -> float:
        """The DRAM bandwidth of one probe pass now (bytes/s, counted as the roof is: read + write)."""
        return 2.0 * self.spec.working_set_bytes / self.run_once()


class ProbedSpec(Protocol):
    """What a schedule reads of a probe's spec (:class:`ProbeSpec`, or the GPU's ``cuda_probe.CudaProbeSpec``)."""

    @property
    def rewarm(self) -> bool: ...

    @property
    def working_set_bytes(self) -> int: ...


class RateProbe(Protocol):
    """What a schedule needs of a probe: its spec and one measurement (:class:`DramProbe`, or the GPU's
    ``cuda_probe.CudaDramProbe``)."""

    @property
    def spec(self) -> ProbedSpec: ...

    def rate(self) -> float: ...


@dataclass
class ProbeSchedule:
    """Alternates a call site's timed calls with probes: the hook for ``time_callable(before_timed_call=)``.

    ``rates[i]`` is the probe rate in force for timed call i (the latest probe before it)."""

    probe: RateProbe
    clock: Callable[[], float] = time.perf_counter
    rates: list[float] = field(default_factory=list)
    probes: list[float] = field(default_factory=list)
    probe_seconds: float = 0.0
    _owed: float = 0.0  # call time since the last probe
    _last_probe_s: float = 0.0

    def __call__(self, previous_call_s: float) -> bool:
        """Probe if the calls since the last probe took as long as it did; True when the caller must run the
        call once, untimed, before timing it (the probe evicted its data: ``ProbeSpec.rewarm``)."""
        self._owed += previous_call_s
        probed = not self.probes or self._owed >= self._last_probe_s
        if probed:
            start = self.clock()
            rate = self.probe.rate()
            cost = self.clock() - start
            if self.probe.spec.rewarm:
                cost += previous_call_s  # the untimed call that follows costs about one call
            self._last_probe_s = cost
            self.probe_seconds += cost
            self.probes.append(rate)
            self._owed = 0.0
        self.rates.append(self.probes[-1])
        return probed and self.probe.spec.rewarm


def wants_probe(footprint_bytes: float | None, machine: Machine, dram_bytes: float) -> bool:
    """Probe a region whose bytes are judged at DRAM and whose data cannot stay in the last cache."""
    return dram_bytes > 0 and past_the_last_cache(footprint_bytes, machine)


def past_the_last_cache(footprint_bytes: float | None, machine: Machine) -> bool:
    """A working set at least ``CACHE_MULTIPLE`` times the last cache (a CPU's largest, or a GPU's L2): a call
    finds next to none of its data in cache whatever ran before it. False when either size is unknown."""
    if not footprint_bytes:
        return False
    capacities = machine.info.get("capacities") or {}
    fingerprint = machine.info.get("fingerprint") or {}
    last = max((float(v) for v in capacities.values()), default=0.0) or float(
        fingerprint.get("l2_bytes") or machine.info.get("l2_bytes") or 0.0)
    return last > 0 and footprint_bytes >= CACHE_MULTIPLE * last


def roofline_bound(kernels: Sequence[KernelSample], machine: Machine) -> tuple[float, str]:
    """The least time and the bound (``compute:fp32``, ``memory:L3``) of kernels run one after another;
    ``(0.0, "")`` with no work or a missing ceiling."""
    try:
        verdict = evaluate_region(list(kernels), machine, 1.0)  # the time changes neither
    except MissingCeilingError:
        return 0.0, ""
    return verdict.t_min, verdict.bound


REWARM_SHARE = 0.01  # an untimed call before each timed one pays when refilling the caches may cost more than this


def rewarm_pays(footprint_bytes: float | None, call_s: float, machine: Machine) -> bool:
    """Whether one untimed call before each timed one (A/B turns, ``ab.lockstep.run_batch``) changes what
    the timed call measures, for a call of ``call_s`` (the roofline's bound before the call was timed, its
    measured time after: the call takes at least the bound). No when the working set is past the last cache
    (nothing of it stays there), or when refilling what the other side's turn may have pushed out takes at most
    ``REWARM_SHARE`` of the call: where twice the working set (this side's and the other's, taken as large) fits
    in the last cache, the smaller caches from the last one; where it does not, the whole of it (up to the last
    cache) from the slowest memory. Yes whenever a size, a bandwidth or the call's time is unknown."""
    if past_the_last_cache(footprint_bytes, machine):
        return False
    caches = machine.info.get("capacities") or {}
    capacities = sorted((float(v), k) for k, v in caches.items())
    if not footprint_bytes or len(capacities) < 2 or not call_s > 0:
        return True
    (last, last_level), (below, _) = capacities[-1], capacities[-2]
    if 2 * footprint_bytes > last:  # the other side's turn evicts it from the last cache too
        memory = [float(v) for k, v in machine.bandwidth.items() if k not in caches]  # levels past the caches
        return not memory or min(footprint_bytes, last) / min(memory) > REWARM_SHARE * call_s
    bandwidth = machine.bandwidth.get(last_level)
    if not bandwidth:
        return True
    return min(footprint_bytes, below) / bandwidth > REWARM_SHARE * call_s


def wants_footprint_probe(footprint_bytes: float | None, machine: Machine,
                          level_bytes: Mapping[str, float]) -> str | None:
    """The level to probe at the call site's own working-set size, or None: bytes judged at the last cache or
    at DRAM, with a working set beyond the cache before the last (so it lives in the last cache, or at its
    edge) and under twice the last cache (beyond that the DRAM probe serves)."""
    capacities = sorted((float(v), k) for k, v in (machine.info.get("capacities") or {}).items())
    if len(capacities) < 2 or not footprint_bytes:
        return None
    (before_last, _), (last, last_name) = capacities[-2], capacities[-1]
    if not before_last < footprint_bytes < CACHE_MULTIPLE * last:
        return None
    judged = [name for name in (last_name, PROBE_LEVEL) if level_bytes.get(name, 0.0) > 0]
    return judged[0] if len(judged) == 1 else None


def live_machine(machine: Machine, spec: ProbeSpec, rate: float) -> Machine:
    """``machine`` with the probed level's roof scaled by the probe: characterized x rate / calibration."""
    live = spec.roof_bytes_per_s * rate / spec.calibration_bytes_per_s
    return replace(machine, bandwidth={**machine.bandwidth, spec.level: live})


class ProbeSummary(TypedDict, total=False):
    """What results.json records of a probed call site (``regions[].probe``, docs/results.md)."""

    level: str  # the memory level whose roof the probe scaled
    kernel: str
    device: str  # a GPU probe's device
    rewarm: bool  # an untimed call after each probe put the call site's data back
    working_set_bytes: int
    threads: int
    launch: dict[str, int]  # a GPU probe's blocks, threads per block and trials
    probes: int
    probe_seconds: float
    characterized_bytes_per_s: float
    calibration_bytes_per_s: float
    live_ratio_median: float  # probed bandwidth / the calibration's, over the probes
    live_ratio_iqr: float
    fraction_cached_roofs: float
    fraction_live: float  # the median call judged against its probe's roof
    unverified_on_hardware: bool


def summary(spec: ProbeSpec, schedule: ProbeSchedule, fraction_cached: float) -> ProbeSummary:
    """What results.json records of a probed region."""
    rates = schedule.probes
    ratios = [r / spec.calibration_bytes_per_s for r in rates]
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {"level": spec.level, "kernel": "ert-update", "rewarm": spec.rewarm,
            "working_set_bytes": spec.working_set_bytes,
            "threads": spec.threads, "probes": len(rates), "probe_seconds": round(schedule.probe_seconds, 6),
            "characterized_bytes_per_s": spec.roof_bytes_per_s,
            "calibration_bytes_per_s": spec.calibration_bytes_per_s,
            "live_ratio_median": statistics.median(ratios), "live_ratio_iqr": q[2] - q[0],
            "fraction_cached_roofs": fraction_cached}
