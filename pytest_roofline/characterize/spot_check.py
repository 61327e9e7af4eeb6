"""A cached CPU record checked when it is loaded: L1, DRAM and FMA passes against what it says.

A record that was clean when measured can still be wrong for today (measured in a slow moment of the host
that no load counter saw), and a slow host can pass for a quiet one; and a cached file is input anyone with
write access to the cache can edit. So before a session uses a cached ERT record it runs the record's own
kernel library (``info.kernel.libraries``, compiled for this fingerprint):

- L1: the update kernel at the update sweep's size nearest the middle of the L1 window, best of 5 calls of ~2 ms;
- DRAM: ``DRAM_PASSES`` single update passes at the DRAM samples' working set, their median;
- FLOPs: for every precision the record has a peak for that the kernel computes (``cpu_ert.ELEMENT_BYTES``:
  fp64 and fp32), the FMA point that set the record's peak at the widest vectors, best of 5 calls of ~2 ms;
- where the record has more than one thread, one DRAM pass and the L1 and FMA probes once more on one thread:
  beside other work a team of threads reads hundreds of times slow at its barriers, one thread does not;

Two judgments follow (:func:`judge`, plain Python over the rates, so tests feed it made-up ones):

- too low, always: a probe that read more than ``clean.LOW_ROOF_FACTOR`` x a roof (the roof gates use, or the
  record's own measurement of it where that is lower) refutes it, busy host or quiet, because other work only
  slows a probe down. Disturbed calls and one-thread probes count here: they are lower bounds too. On a host
  with many threads a one-thread probe cannot refute a 10x low roof, so there it rests on the team's probes;
- either way, only when quiet: each check compared with the record (``info.levels.<L>.update_bytes_per_s``, like
  with like; FLOPs: its peak at that width); DRAM with the interquartile range of the record's own update passes,
  which were spread over its run (``clean.Spot``). When other work ran beside it (``clean.PassGuard``) or too
  few passes were undisturbed, this part is not judged. ``clean.spot_reasons`` decides.

What a check costs is in docs/characterization-under-load.md. Set ``PYTEST_ROOFLINE_SPOT_CHECK=0`` to skip it (pinned
machine files never go through it). The rules that need no probe are ``clean.structure_reasons``, applied to
every cached CPU record as it is read (``machine._checked_cached``).
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypedDict

from pytest_roofline.characterize import clean

DRAM_PASSES = 6
MIN_CLEAN_DRAM_PASSES = 4
ENV = "PYTEST_ROOFLINE_SPOT_CHECK"


class ComputeStep(TypedDict):
    """The FMA point that set a record's peak of one precision: FLOPs per element, working set, that peak at
    the widest vectors (None where the record has none: then only the too-low judgment applies)."""

    flops: int
    bytes: int
    cached: float | None


class SpotPlan(TypedDict):
    """What :func:`run` runs for a record: its kernel library, the sizes, the cached rates to compare with."""

    library: Path
    width: int
    chains: int
    threads: int
    l1_bytes: int
    dram_bytes: int
    l1_cached: float
    dram_cached: float
    dram_band: tuple[float, float] | None
    compute: dict[str, ComputeStep]  # by precision


class Reading(NamedTuple):
    """One probe's rate, and whether every thread ran through it (a disturbed rate is a lower bound).
    ``team``: run on the record's threads; False: on one thread, a lower bound of the team's rate that only the
    too-low judgment uses."""

    rate: float
    clean: bool
    team: bool = True


class Verdict(NamedTuple):
    """What a spot check found: ``spots`` for the quiet comparison (None when not judged, ``done`` says why),
    ``low_roofs`` the roofs a probe refuted whatever ran beside it."""

    spots: dict[str, clean.Spot] | None
    done: str
    low_roofs: list[str]


def enabled(environ: Mapping[str, str] = os.environ) -> bool:
    return str(environ.get(ENV, "1")).strip().lower() not in ("0", "no", "false", "off")


def plan(info: dict[str, Any], peak_flops: Mapping[str, float] | None = None) -> SpotPlan | None:
    """What to run for a record (library, sizes, cached rates), or None when it cannot be spot-checked: not an
    ERT record, no DRAM samples or L1 update plateau, or its kernel library is gone. ``peak_flops``: the
    record's roofs, so a precision with a roof but no FMA sweep in ``info`` is probed too."""
    if not str(info.get("method", "")).startswith("ert"):
        return None
    kernel = info.get("kernel") or {}
    libraries = {int(bits) // 8: Path(path) for bits, path in (kernel.get("libraries") or {}).items()}
    levels = info.get("levels") or {}
    samples = (levels.get("DRAM") or {}).get("samples") or {}
    l1 = levels.get("L1") or {}
    if not libraries or not samples.get("update_bytes_per_s") or not l1.get("update_bytes_per_s"):
        return None
    width = max(libraries)
    if not libraries[width].exists():
        return None
    low, high = l1.get("window_bytes") or (0, 0)
    rows = [r for r in (info.get("sweep") or {}).get("update") or () if low <= r.get("working_set_bytes", -1) <= high]
    if not rows:
        return None
    # The middle of the L1 window, not its fastest point: that is often at the window's top edge, where later
    # calls sometimes spill to L2 and read about half the plateau (docs/characterization-under-load.md).
    sizes = [int(r["working_set_bytes"]) for r in rows]
    middle = math.sqrt(max(low, min(sizes)) * high)
    l1_size = min(sizes, key=lambda size: abs(math.log(size / middle)))
    threads, chains = int(info.get("threads") or 1), int(kernel.get("chains") or 8)
    granularity = threads * chains * 64  # cpu_ert.ErtLibrary.granularity_bytes
    compute = {precision: step for precision in _precisions(info, peak_flops or {})
               if (step := _compute_step(info, width, precision, l1_size, granularity)) is not None}
    return {"library": libraries[width], "width": width, "chains": chains,
            "threads": threads, "l1_bytes": l1_size,
            "dram_bytes": int(samples["working_set_bytes"]), "l1_cached": float(l1["update_bytes_per_s"]),
            "dram_cached": float(samples["update_bytes_per_s"]), "dram_band": _band(samples.get("update_samples")),
            "compute": compute}


def _precisions(info: dict[str, Any], peak_flops: Mapping[str, float]) -> list[str]:
    """The precisions the record has a peak for that the kernel library computes, fp64 first."""
    from pytest_roofline.characterize.cpu_ert import ELEMENT_BYTES

    isa_peaks = info.get("isa_peaks") or {}
    return [p for p in ELEMENT_BYTES if p in peak_flops or (isinstance(isa_peaks, Mapping) and p in isa_peaks)]


def _compute_step(info: dict[str, Any], width: int, precision: str, fallback_bytes: int,
                  granularity: int) -> ComputeStep | None:
    """The FMA point that set the record's ``precision`` peak at the widest vectors (its FLOPs per element and
    working set), with that peak. A host can halve the compute roofs for minutes while the caches barely move
    (two vCPUs sharing one core's FMA units read the 1-core value, with no steal), so FMA passes are checked as
    well. Where the record has no usable point (none, or FLOPs the library has no kernel for), the compute-bound
    ``cpu.PEAK_FLOPS`` at the L1 check's size: the roof is still probed."""
    from pytest_roofline.characterize.cpu import PEAK_FLOPS
    from pytest_roofline.characterize.cpu_ert import ERT_FLOPS

    by_width = ((info.get("isa_peaks") or {}).get(precision) or {})
    peak = by_width.get(str(width * 8)) if isinstance(by_width, Mapping) else None
    cached = float(peak) if isinstance(peak, (int, float)) and not isinstance(peak, bool) and peak > 0 else None
    rows = [r for r in (info.get("sweep") or {}).get("flops") or ()
            if r.get("precision") == precision and r.get("vector_bits") == width * 8 and r.get("flop_per_s")]
    step: ComputeStep = {"flops": PEAK_FLOPS, "bytes": fallback_bytes, "cached": cached}
    if rows:
        best = max(rows, key=lambda r: float(r["flop_per_s"]))
        flops, size = int(best.get("flops_per_element") or 0), int(best.get("working_set_bytes") or 0)
        if flops in ERT_FLOPS and size > 0 and size % granularity == 0:
            step = {"flops": flops, "bytes": size, "cached": cached}
    return step


def _band(samples: Iterable[float] | None) -> tuple[float, float] | None:
    """The interquartile range of a record's DRAM passes; None for fewer than 4."""
    values = [float(v) for v in samples or ()]
    if len(values) < 4:
        return None
    q1, _, q3 = statistics.quantiles(values, n=4)
    return q1, q3


Rates = dict[str, list[Reading]]  # by check: "L1", "DRAM", and each precision of ``SpotPlan.compute``


def probe(steps: SpotPlan) -> Rates:
    """Every probe of a plan, run with the record's kernel library."""
    from pytest_roofline.characterize import cpu_ert

    library = cpu_ert.ErtLibrary({steps["width"]: steps["library"]}, steps["chains"], steps["threads"],
                                 max([steps["dram_bytes"], steps["l1_bytes"],
                                      *(step["bytes"] for step in steps["compute"].values())]))
    dram = []
    for _ in range(DRAM_PASSES):
        seconds, share = library.run("fp64", steps["width"], 1, steps["dram_bytes"], 1)
        dram.append(Reading(2.0 * steps["dram_bytes"] / seconds, share >= cpu_ert.CLEAN_SHARE))
    l1 = cpu_ert.measure(library, "fp64", steps["width"], 1, steps["l1_bytes"], target_seconds=0.002, repeats=5)
    rates: Rates = {"DRAM": dram, "L1": [Reading(l1.bandwidth, l1.clean)]}
    for precision, step in steps["compute"].items():
        point = cpu_ert.measure(library, precision, steps["width"], step["flops"], step["bytes"],
                                target_seconds=0.002, repeats=5)
        rates[precision] = [Reading(point.flop_rate, point.clean)]
    if steps["threads"] > 1:
        # One thread as well: beside other work a team waits at its barriers for whichever thread was
        # descheduled, and a short call then reads hundreds of times slow, while one thread runs whenever it is
        # given a core. A team never does less than one of its threads alone, so these rates bound its roofs
        # from below.
        library.threads = 1
        seconds, share = library.run("fp64", steps["width"], 1, steps["dram_bytes"], 1)
        rates["DRAM"].append(Reading(2.0 * steps["dram_bytes"] / seconds, share >= cpu_ert.CLEAN_SHARE, False))
        l1 = cpu_ert.measure(library, "fp64", steps["width"], 1, steps["l1_bytes"], target_seconds=0.002,
                             repeats=5)
        rates["L1"].append(Reading(l1.bandwidth, l1.clean, False))
        for precision, step in steps["compute"].items():
            point = cpu_ert.measure(library, precision, steps["width"], step["flops"], step["bytes"],
                                    target_seconds=0.002, repeats=5)
            rates[precision].append(Reading(point.flop_rate, point.clean, False))
    return rates


def run(info: dict[str, Any], guard: clean.PassGuard | None = None, *,
        peak_flops: Mapping[str, float] | None = None, bandwidth: Mapping[str, float] | None = None,
        measure: Callable[[SpotPlan], Rates] | None = None) -> Verdict:
    """The plan's probes (``measure``, :func:`probe` by default) run under ``guard`` (a load watch on our cores
    by default), then :func:`judge`d against the record's ``info`` and its roofs (``peak_flops``,
    ``bandwidth``)."""
    steps = plan(info, peak_flops)
    if steps is None:
        return Verdict(None, "no spot check for this record", [])
    guard = guard or clean.PassGuard.for_cores()
    rates, busy = guard.run(lambda: (measure or probe)(steps))
    return judge(steps, rates, busy, peak_flops or {}, bandwidth or {})


def judge(steps: SpotPlan, rates: Rates, busy: str | None, peak_flops: Mapping[str, float],
          bandwidth: Mapping[str, float]) -> Verdict:
    """The too-low judgment always; the quiet comparison only when nothing ran beside the probes (``busy`` is
    None) and enough of them were undisturbed."""
    cached = {"L1": steps["l1_cached"], "DRAM": steps["dram_cached"],
              **{p: step["cached"] for p, step in steps["compute"].items()}}
    probes = {}
    for name, readings in rates.items():
        fastest = max((r.rate for r in readings if math.isfinite(r.rate)), default=0.0)
        roofs = [v for v in ((bandwidth if name in ("L1", "DRAM") else peak_flops).get(name), cached.get(name))
                 if v is not None and v > 0]
        if fastest > 0 and roofs:
            probes[name] = clean.Probe(fastest, min(roofs), "GB/s" if name in ("L1", "DRAM") else "GFLOP/s")
    low_roofs = clean.low_roof_reasons(probes)
    if busy is not None:
        return Verdict(None, f"not judged: {busy}", low_roofs)
    team = {name: [r for r in readings if r.team] for name, readings in rates.items()}
    calm = [r.rate for r in team.get("DRAM", ()) if r.clean]
    l1 = team.get("L1") or [Reading(0.0, False)]
    compute = {p: team.get(p) or [Reading(0.0, False)] for p in steps["compute"]}
    if (len(calm) < MIN_CLEAN_DRAM_PASSES or not l1[0].clean
            or not all(readings[0].clean for readings in compute.values())):
        return Verdict(None, "not judged: threads were descheduled during the spot passes", low_roofs)
    spots = {"L1": clean.Spot.of(l1[0].rate, steps["l1_cached"]),
             "DRAM": clean.Spot.of(statistics.median(calm), steps["dram_cached"], steps.get("dram_band"))}
    for precision, step in steps["compute"].items():
        if step["cached"] is not None:
            spots[precision] = clean.Spot.of(compute[precision][0].rate, step["cached"], unit="GFLOP/s")
    return Verdict(spots, "checked", low_roofs)
