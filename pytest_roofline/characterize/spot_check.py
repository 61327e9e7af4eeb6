"""A cached CPU record checked when it is loaded: L1, DRAM and fp64 FMA passes against what it says.

A record that was clean when measured can still be wrong for today (measured in a slow moment of the host
that no load counter saw), and a slow host can pass for a quiet one. So before a session uses a cached ERT
record it runs the record's own kernel library (``info.kernel.libraries``, compiled for this fingerprint):

- L1: the update kernel at the update sweep's size nearest the middle of the L1 window, best of 5 calls of ~2 ms;
- DRAM: ``DRAM_PASSES`` single update passes at the DRAM samples' working set, their median;
- fp64: the FMA point that set the record's fp64 peak at the widest vectors, best of 5 calls of ~2 ms;

each compared with the record (``info.levels.<L>.update_bytes_per_s``, like with like; fp64: its peak at that
width); DRAM with the interquartile range of the record's own update passes, which were spread over its run
(``clean.Spot``). Quiet, on the 2-vCPU Zen 3 VM: 0.24-0.63 s for the first check of a process (loading the
library and faulting in the 181 MiB buffer), 0.10-0.12 s for a second. When other work ran beside it
(``clean.PassGuard``) or too few passes were undisturbed, nothing is judged: the record is used.
``clean.spot_reasons`` decides.
Set ``PYTEST_ROOFLINE_SPOT_CHECK=0`` to skip it (pinned machine files never go through it).
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypedDict

from pytest_roofline.characterize import clean

DRAM_PASSES = 6
MIN_CLEAN_DRAM_PASSES = 4
ENV = "PYTEST_ROOFLINE_SPOT_CHECK"


class ComputeStep(TypedDict):
    """The FMA point that set a record's fp64 peak: FLOPs per element, working set, that peak."""

    flops: int
    bytes: int
    cached: float


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
    compute: ComputeStep | None


def enabled(environ: Mapping[str, str] = os.environ) -> bool:
    return str(environ.get(ENV, "1")).strip().lower() not in ("0", "no", "false", "off")


def plan(info: dict[str, Any]) -> SpotPlan | None:  # info: Machine.info, as the model types it
    """What to run for a record (library, sizes, cached rates), or None when it cannot be spot-checked: not an
    ERT record, no DRAM samples or L1 update plateau, or its kernel library is gone."""
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
    # The middle of the L1 window, not its fastest point: that is often at the window's top edge (38 of 8-48 KiB
    # on 2 threads of the Zen 3 VM), where later calls sometimes spill to L2 and read half (189-225 GB/s
    # against 392-412 at 24-32 KiB, one minute, quiet).
    sizes = [int(r["working_set_bytes"]) for r in rows]
    middle = math.sqrt(max(low, min(sizes)) * high)
    l1_size = min(sizes, key=lambda size: abs(math.log(size / middle)))
    compute = _compute_step(info, width)
    return {"library": libraries[width], "width": width, "chains": int(kernel.get("chains") or 8),
            "threads": int(info.get("threads") or 1), "l1_bytes": l1_size,
            "dram_bytes": int(samples["working_set_bytes"]), "l1_cached": float(l1["update_bytes_per_s"]),
            "dram_cached": float(samples["update_bytes_per_s"]), "dram_band": _band(samples.get("update_samples")),
            "compute": compute}


def _compute_step(info: dict[str, Any], width: int) -> ComputeStep | None:
    """The fp64 FMA point that set the record's peak at the widest vectors (its FLOPs per element and working
    set), with that peak; None where the record has no such point. A host can halve the compute roofs for
    minutes while the caches barely move (fp64 on 2 threads read 53.5 GFLOP/s, the 1-core value, between quiet
    records of 93-100 on the Zen 3 VM, with no steal: the two vCPUs apparently sharing one core's FMA units), so
    one FMA pass is checked as well."""
    peak = ((info.get("isa_peaks") or {}).get("fp64") or {}).get(str(width * 8))
    rows = [r for r in (info.get("sweep") or {}).get("flops") or ()
            if r.get("precision") == "fp64" and r.get("vector_bits") == width * 8 and r.get("flop_per_s")]
    if not peak or not rows:
        return None
    best = max(rows, key=lambda r: float(r["flop_per_s"]))
    return {"flops": int(best["flops_per_element"]), "bytes": int(best["working_set_bytes"]), "cached": float(peak)}


def _band(samples: Iterable[float] | None) -> tuple[float, float] | None:
    """The interquartile range of a record's DRAM passes; None for fewer than 4."""
    values = [float(v) for v in samples or ()]
    if len(values) < 4:
        return None
    q1, _, q3 = statistics.quantiles(values, n=4)
    return q1, q3


def run(info: dict[str, Any], guard: clean.PassGuard | None = None) -> tuple[dict[str, clean.Spot] | None, str]:
    """({check: its Spot}, what was done); None when nothing could be judged (and why)."""
    steps = plan(info)
    if steps is None:
        return None, "no spot check for this record"
    from pytest_roofline.characterize import cpu_ert

    guard = guard or clean.PassGuard.for_cores()
    library = cpu_ert.ErtLibrary({steps["width"]: steps["library"]}, steps["chains"], steps["threads"],
                                 max(steps["dram_bytes"], steps["l1_bytes"]))
    rates = cpu_ert.KernelRates(library, steps["width"])

    compute = steps.get("compute")

    def passes() -> tuple[list[float | None], float, float | None]:
        dram = [rates.update_rate(steps["dram_bytes"]) for _ in range(DRAM_PASSES)]
        l1 = cpu_ert.measure(library, "fp64", steps["width"], 1, steps["l1_bytes"], target_seconds=0.002,
                             repeats=5)
        fma = None
        if compute is not None:
            point = cpu_ert.measure(library, "fp64", steps["width"], compute["flops"], compute["bytes"],
                                    target_seconds=0.002, repeats=5)
            fma = point.flop_rate if point.clean else 0.0
        return dram, (l1.bandwidth if l1.clean else 0.0), fma

    (dram, l1_rate, fma_rate), busy = guard.run(passes)
    calm = [rate for rate in dram if rate is not None]
    if busy is not None:
        return None, f"not judged: {busy}"
    if len(calm) < MIN_CLEAN_DRAM_PASSES or not l1_rate or fma_rate == 0.0:
        return None, "not judged: threads were descheduled during the spot passes"
    spots = {"L1": clean.Spot.of(l1_rate, steps["l1_cached"]),
             "DRAM": clean.Spot.of(statistics.median(calm), steps["dram_cached"], steps.get("dram_band"))}
    if compute is not None and fma_rate is not None:
        spots["fp64"] = clean.Spot.of(fma_rate, compute["cached"], unit="GFLOP/s")
    return spots, "checked"
