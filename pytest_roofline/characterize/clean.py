"""When a characterization is clean enough to be kept in the cache, and when a cached one still holds.

Plain Python over numbers (no measuring here): every rule returns the reasons a record is not clean, an empty
list when it is. ``characterize/machine.py`` keeps a record in the cache only when ``record_reasons`` (and,
where the other core count's record is cached, ``core_count_reasons``) are empty; otherwise the record is
used by this session only and the next one measures again.

Why these rules. Beside other work the roofs move both ways, DRAM by up to twice its quiet value or to
two thirds of it, L1 by a tenth or more (docs/characterization-under-load.md has the runs). The
per-thread CPU-time check alone lets much of that through: a pass in which no thread of ours was descheduled
can still share the host with the neighbour. So a pass is also judged by what /proc/stat saw beside it
(``pass_reason``: other processes' ticks on our cores, the hypervisor's steal), a record by how many of its
watched spans were disturbed, how many undisturbed passes set each roof, and whether the roofs fit together.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pytest_roofline.characterize.validate import EXACT_ON
from pytest_roofline.host.cores import current_affinity
from pytest_roofline.host.load_watch import LoadWatch

# --- one pass --------------------------------------------------------------------------------------------
MAX_OTHERS_SHARE = 0.15  # other processes' busy ticks, as a share of the watched cores' ticks
MAX_STEAL_SHARE = 0.05   # ticks the hypervisor gave to another guest
TICK_SLACK = 1           # ticks are 10 ms: one tick of other work in a short span is noise (a kernel thread)

# --- one record ------------------------------------------------------------------------------------------
MAX_DISTURBED_SPANS = 0.1  # of the watched spans (a level's part of a sweep pass, a moment of DRAM passes): a
# neighbour that disturbed more than this also reaches the spans it did not show in: spans that look quiet
# beside it still read their roofs off by tens of percent (docs/characterization-under-load.md)
MIN_WINDOW_POINTS = 3     # undisturbed sweep points of the roof's kernel inside each cache level's window
MIN_DRAM_SAMPLES = 12     # undisturbed single passes of the DRAM roof's kernel (of 32 taken)
# Their interquartile range / median. Not a neighbour detector (the spans are): on a quiet but shared host DRAM
# moves from one moment to the next, and the roof is the median of passes spread over the run for that reason.
# A quiet shared host's spread moves from hour to hour by a factor of three (docs/characterization-under-load.md):
# a limit near its quiet values refuses quiet records, and a session then measures twice and keeps nothing.
MAX_DRAM_SPREAD = 0.5
DRAM_OVER_CACHE = 1.0     # DRAM at most the last cache level's roof
# Every all-core roof at least ONE_CORE_FLOOR x the same roof on one core, and at most CORE_SCALING_MARGIN x
# cores x it. The two records are measured minutes to days apart, and one roof of a quiet host moves a lot
# between moments: clean all-core L1 roofs have read 1.2-1.3x two cores' worth of a cached one-core roof, which
# a margin of 1.1 refused. The floor still refuses an all-core DRAM that a neighbour pushed below the one-core
# roof (docs/characterization-under-load.md). A record that is
# clean by its own evidence twice and refused only by this rule replaces the other record
# (machine._sibling_is_the_odd_one), so an odd cached record cannot refuse every fresh one for good.
ONE_CORE_FLOOR = 0.8
CORE_SCALING_MARGIN = 1.3

# --- a cached record, spot-checked when loaded ------------------------------------------------------------
SPOT_MARGIN = 0.2  # a quiet spot pass more than 20 % outside what the record saw: measure again
# A probe reading more than this x a cached roof refutes the roof whatever ran beside it, busy host or quiet:
# other work only takes time from a probe (a descheduled thread, FMA units or a memory bus shared with another
# guest), it never adds FLOPs or bytes to it. What makes an honest record read below a probe stays under about
# 2x (docs/characterization-under-load.md has the figures): a record taken while two vCPUs shared one core's
# FMA units, all-core DRAM beside other work, turbo clocks between a long run and a short probe. 3x stays clear
# of those and still refuses a 10x (or 4x) low roof on every try; a roof 20 % to 3x low is left to the quiet
# check above, confirmed twice.
LOW_ROOF_FACTOR = 3.0
# A cached roof below the record's own measurement of it by more than this share breaks the rule that a roof is
# the best the record measured (JSON keeps floats exactly: the slack is for hand-made records only).
OWN_EVIDENCE_SLACK = 0.01


class Ticks(Protocol):
    """What ``host.load_watch.Disturbance`` carries (read-only: it is a frozen dataclass)."""

    @property
    def others_ticks(self) -> int: ...
    @property
    def steal_ticks(self) -> int: ...
    @property
    def wall_ticks(self) -> float: ...
    @property
    def cores(self) -> int: ...


class Watch(Protocol):
    """What ``host.load_watch.LoadWatch`` offers once started."""

    def stop(self) -> Ticks | None: ...


def pass_reason(seen: Ticks | None) -> str | None:
    """Why a watched pass was disturbed by other work or the hypervisor; None when it was not (or unknown)."""
    if seen is None:
        return None
    total = seen.wall_ticks * seen.cores
    if total <= 0:
        return None
    if seen.others_ticks > TICK_SLACK and seen.others_ticks > MAX_OTHERS_SHARE * total:
        return f"other processes used {seen.others_ticks / total:.0%} of the cores measured on"
    if seen.steal_ticks > TICK_SLACK and seen.steal_ticks > MAX_STEAL_SHARE * total:
        return f"the hypervisor took {seen.steal_ticks / total:.0%} of the time (steal)"
    return None


T = TypeVar("T")


@dataclass
class PassGuard:
    """Runs passes under a load watch; remembers why each disturbed one was (``reasons``)."""

    start: Callable[[], Watch | None]  # None where nothing is known
    reasons: list[str]
    spans: int = 0  # how many were watched

    @classmethod
    def for_cores(cls, cores: Sequence[int] | None = None) -> PassGuard:
        # default: the cores this process may run on now (the pinned ones inside ``cores.pinned``)
        return cls(lambda: LoadWatch.start(cores if cores is not None else current_affinity()), [])

    def run(self, body: Callable[[], T]) -> tuple[T, str | None]:
        watch = self.start()
        self.spans += 1
        result = body()
        reason = pass_reason(watch.stop() if watch is not None else None)
        if reason is not None:
            self.reasons.append(reason)
        return result, reason


# --- a record's rules ------------------------------------------------------------------------------------

def record_reasons(bandwidth: Mapping[str, float], info: Mapping[str, Any]) -> list[str]:
    """Every reason a fresh CPU characterization is not clean, from its own evidence (``info``)."""
    reasons: list[str] = []
    if str(info.get("method", "")).startswith("ert"):
        reasons += span_reasons(info)
        reasons += window_reasons(info)
        reasons += dram_sample_reasons(info)
    reasons += dram_vs_cache_reasons(bandwidth)
    return reasons


def span_reasons(info: Mapping[str, Any]) -> list[str]:
    """At most ``MAX_DISTURBED_SPANS`` of the watched spans may have seen other work."""
    watched = int(info.get("watched_spans") or 0)
    disturbed = list(info.get("disturbed_spans") or ())
    if watched and len(disturbed) > MAX_DISTURBED_SPANS * watched:
        return [(f"other work beside {len(disturbed)} of {watched} watched spans (at most "
                 f"{MAX_DISTURBED_SPANS:.0%}; {disturbed[0]})")]
    return []


def window_reasons(info: Mapping[str, Any]) -> list[str]:
    """Each cache level needs ``MIN_WINDOW_POINTS`` undisturbed points of its roof's kernel in its window."""
    levels = info.get("levels") or {}
    sweep = info.get("sweep") or {}
    reasons = []
    for level, entry in levels.items():
        if level == "DRAM":
            continue  # set by single-pass samples, judged by dram_sample_reasons
        kernel = str(entry.get("kernel") or "ert-update").removeprefix("ert-")
        low, high = entry.get("window_bytes") or (0, 0)
        rows = [r for r in sweep.get(kernel) or () if low <= r.get("working_set_bytes", -1) <= high]
        undisturbed = sum(bool(r.get("clean", True)) and bool(r.get("quiet", True)) for r in rows)
        if undisturbed < MIN_WINDOW_POINTS:
            reasons.append(f"{level}: {undisturbed} undisturbed sweep point(s) of {len(rows)} in its window "
                           f"(at least {MIN_WINDOW_POINTS} needed)")
    return reasons


def dram_sample_reasons(info: Mapping[str, Any]) -> list[str]:
    """The DRAM roof's kernel needs ``MIN_DRAM_SAMPLES`` undisturbed passes, spread at most ``MAX_DRAM_SPREAD``."""
    entry = (info.get("levels") or {}).get("DRAM")
    if entry is None:
        return []
    samples = entry.get("samples")
    if samples is None:
        return ["DRAM: no single-pass samples, only the sweep's plateau"]
    kernel = str(entry.get("kernel") or "ert-update").removeprefix("ert-")
    kernel = "copy" if kernel.endswith("-copy") else kernel  # torch-copy / numpy-copy: the copy_samples
    values = [float(v) for v in samples.get(f"{kernel}_samples") or ()]
    reasons = []
    if len(values) < MIN_DRAM_SAMPLES:
        reasons.append(f"DRAM: {len(values)} undisturbed {kernel} passes "
                       f"({samples.get('disturbed_samples', 0)} disturbed; at least {MIN_DRAM_SAMPLES} needed)")
    spread = relative_spread(values)
    if spread is not None and spread > MAX_DRAM_SPREAD:
        reasons.append(f"DRAM: its passes spread {spread:.0%} (interquartile range / median; at most "
                       f"{MAX_DRAM_SPREAD:.0%})")
    return reasons


def relative_spread(values: Sequence[float]) -> float | None:
    """Interquartile range / median; None for fewer than 4 values."""
    if len(values) < 4:
        return None
    q1, _, q3 = statistics.quantiles(values, n=4)
    middle = statistics.median(values)
    return (q3 - q1) / middle if middle > 0 else None


def dram_vs_cache_reasons(bandwidth: Mapping[str, float]) -> list[str]:
    caches = sorted(level for level in bandwidth if level.startswith("L") and level[1:].isdigit())
    dram = bandwidth.get("DRAM")
    if dram is None or not caches:
        return []
    last = caches[-1]
    if dram > DRAM_OVER_CACHE * bandwidth[last]:
        return [f"DRAM {dram / 1e9:.4g} GB/s is above {last} ({bandwidth[last] / 1e9:.4g} GB/s)"]
    return []


def _exact_floor(peaks: Mapping[str, float]) -> dict[str, float]:
    """Reduced precisions at least at the roof that computes them exactly (validate.EXACT_ON), as a finished
    record holds them: a fresh record's raw bf16 (an emulated few GFLOP/s) is otherwise compared with a cached
    record's floored one, and never agrees."""
    floored = dict(peaks)
    for precision, exact_on in EXACT_ON.items():
        floor = max((peaks[p] for p in exact_on if p in peaks), default=None)
        if precision in floored and floor is not None:
            floored[precision] = max(floored[precision], floor)
    return floored


def core_count_reasons(all_cores: Mapping[str, Mapping[str, float]], one_core: Mapping[str, Mapping[str, float]],
                       cores: int) -> list[str]:
    """Every roof both records have: one core x ``ONE_CORE_FLOOR`` <= all cores <= one core x cores x
    ``CORE_SCALING_MARGIN``. Each argument maps 'bandwidth' / 'peak_flops' to roofs."""
    reasons = []
    for table, unit in (("bandwidth", "GB/s"), ("peak_flops", "GFLOP/s")):
        mine, theirs = dict(all_cores.get(table) or {}), dict(one_core.get(table) or {})
        if table == "peak_flops":
            mine, theirs = _exact_floor(mine), _exact_floor(theirs)
        for name, value in mine.items():
            single = theirs.get(name)
            if not single:
                continue
            if value < ONE_CORE_FLOOR * single:
                reasons.append(f"{name} on all {cores} cores ({value / 1e9:.4g} {unit}) is below "
                               f"{ONE_CORE_FLOOR:g} x its 1-core roof ({single / 1e9:.4g})")
            elif value > CORE_SCALING_MARGIN * cores * single:
                reasons.append(f"{name} on all {cores} cores ({value / 1e9:.4g} {unit}) is above "
                               f"{CORE_SCALING_MARGIN:g} x {cores} x its 1-core roof ({single / 1e9:.4g})")
    return reasons


@dataclass(frozen=True)
class Spot:
    """A spot reading against a cached record: ``low``..``high`` is what the record itself saw of that roof.

    For DRAM that is the interquartile range of the record's single passes, spread over its run: on a shared
    host DRAM moves from moment to moment (by a third from one second to the next, quiet), and a spot check of
    six passes sees one moment. For L1 it is the cached roof alone."""

    spot: float
    cached: float
    low: float
    high: float
    unit: str = "GB/s"

    @classmethod
    def of(cls, spot: float, cached: float, band: tuple[float, float] | None = None, unit: str = "GB/s") -> Spot:
        low, high = band if band is not None else (cached, cached)
        return cls(spot, cached, min(low, cached), max(high, cached), unit)

    def off(self) -> float:
        """How far outside the band the spot is, as a share of the band's edge (0 inside it); signed."""
        if self.spot > self.high > 0:
            return self.spot / self.high - 1
        if 0 < self.spot < self.low:
            return self.spot / self.low - 1
        return 0.0


def as_spots(spots: Mapping[str, Spot | tuple[float, float]]) -> dict[str, Spot]:
    """Each check as a ``Spot``; a (spot rate, cached rate) pair has no band beyond the cached rate."""
    return {name: given if isinstance(given, Spot) else Spot.of(*given) for name, given in spots.items()}


def spot_reasons(spots: Mapping[str, Spot | tuple[float, float]]) -> list[str]:
    """``spots`` maps a check's name to its ``Spot`` (or (spot rate, cached rate)): the ones more than
    ``SPOT_MARGIN`` outside what the record saw."""
    reasons = []
    for name, reading in as_spots(spots).items():
        if reading.cached <= 0 or abs(reading.off()) <= SPOT_MARGIN:
            continue
        band = (f"{reading.cached / 1e9:.4g}" if reading.low == reading.high else
                f"{reading.cached / 1e9:.4g}, its passes {reading.low / 1e9:.4g}-{reading.high / 1e9:.4g}")
        reasons.append(f"{name}: a spot pass read {reading.spot / 1e9:.4g} {reading.unit}, the cache says {band} "
                       f"({reading.spot / reading.cached:.2f}x; at most {SPOT_MARGIN:.0%} outside)")
    return reasons


def spot_directions(spots: Mapping[str, Spot | tuple[float, float]]) -> dict[str, int]:
    """The checks outside the margin, each with the side it is off on (+1 above, -1 below)."""
    out = {}
    for name, reading in as_spots(spots).items():
        if reading.cached > 0 and abs(reading.off()) > SPOT_MARGIN:
            out[name] = 1 if reading.off() > 0 else -1
    return out


@dataclass(frozen=True)
class Probe:
    """What a quick probe read of one roof now, against the lowest value the cached record gives that roof.

    ``measured`` is the fastest reading, disturbed or not: a disturbed reading is still a lower bound of what the
    machine does. ``roof`` is the roof gates use or the record's own measurement of it, whichever is lower."""

    measured: float
    roof: float
    unit: str = "GB/s"


def low_roof_reasons(probes: Mapping[str, Probe]) -> list[str]:
    """The roofs a probe read more than ``LOW_ROOF_FACTOR`` x above: conclusive even when other work ran beside
    the probe, which can only have slowed it down."""
    reasons = []
    for name, probe in probes.items():
        if probe.roof > 0 and probe.measured > LOW_ROOF_FACTOR * probe.roof:
            reasons.append(f"{name}: a probe read {probe.measured / 1e9:.4g} {probe.unit} now, the cached roof is "
                           f"{probe.roof / 1e9:.4g} ({probe.measured / probe.roof:.1f}x; more than "
                           f"{LOW_ROOF_FACTOR:g}x is not the host's noise: other work only slows a probe down)")
    return reasons


def _positive(value: object) -> float | None:
    """A finite positive number from an untrusted record; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if 0 < number < float("inf") else None


def _table(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def structure_reasons(peak_flops: Mapping[str, float], bandwidth: Mapping[str, float],
                      info: Mapping[str, Any]) -> list[str]:
    """Every rule a cached CPU record breaks that needs no probe, each named in its reason:

    - fp32 at least fp64: a CPU's vector and matrix units do at least as many fp32 FLOPs a cycle as fp64 ones
      (twice as many at the same width), for the roofs and for each vector width of ``info.isa_peaks``;
    - a roof at least its own measurement: a record's roof is the best kernel it measured, so it is not below
      ``info.isa_peaks`` (FLOPs) or the update kernel's rate of that level (``info.levels``);
    - a reduced precision at least the roof that computes it exactly (``validate.EXACT_ON``), as every
      characterization leaves it (``validate.reconcile``)."""
    reasons = []
    floor = 1 - OWN_EVIDENCE_SLACK
    fp32, fp64 = _positive(peak_flops.get("fp32")), _positive(peak_flops.get("fp64"))
    if fp32 is not None and fp64 is not None and fp32 < fp64:
        reasons.append(f"fp32 roof {fp32 / 1e9:.4g} GFLOP/s is below the fp64 roof {fp64 / 1e9:.4g} (rule: fp32 "
                       "at least fp64, a CPU does at least as many fp32 FLOPs a cycle as fp64 ones)")
    isa_peaks = _table(info.get("isa_peaks"))
    fp32_widths, fp64_widths = _table(isa_peaks.get("fp32")), _table(isa_peaks.get("fp64"))
    for bits, value in fp64_widths.items():
        single, double = _positive(fp32_widths.get(bits)), _positive(value)
        if single is not None and double is not None and single < double:
            reasons.append(f"fp32 at {bits}-bit {single / 1e9:.4g} GFLOP/s is below fp64 at {bits}-bit "
                           f"{double / 1e9:.4g} (rule: fp32 at least fp64 at the same vector width)")
    for precision, widths in isa_peaks.items():
        measured = max((v for v in map(_positive, _table(widths).values()) if v is not None), default=None)
        roof = _positive(peak_flops.get(str(precision)))
        if measured is not None and roof is not None and roof < floor * measured:
            reasons.append(f"{precision} roof {roof / 1e9:.4g} GFLOP/s is below the record's own FMA peak "
                           f"{measured / 1e9:.4g} (rule: a roof at least its own measurement)")
    for level, entry in _table(info.get("levels")).items():
        entry = _table(entry)
        own = _positive(_table(entry.get("samples")).get("update_bytes_per_s") if level == "DRAM"
                        else entry.get("update_bytes_per_s"))
        roof = _positive(bandwidth.get(str(level)))
        if own is not None and roof is not None and roof < floor * own:
            reasons.append(f"{level} roof {roof / 1e9:.4g} GB/s is below the record's own update kernel rate "
                           f"{own / 1e9:.4g} (rule: a roof at least its own measurement)")
    for precision, exact_on in EXACT_ON.items():
        reduced = _positive(peak_flops.get(precision))
        exact = max(((v, p) for p in exact_on if (v := _positive(peak_flops.get(p))) is not None), default=None)
        if reduced is not None and exact is not None and reduced < floor * exact[0]:
            reasons.append(f"{precision} roof {reduced / 1e9:.4g} GFLOP/s is below the {exact[1]} roof "
                           f"{exact[0] / 1e9:.4g} (rule: a reduced precision at least the roof that computes it "
                           "exactly)")
    return reasons
