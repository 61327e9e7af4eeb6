"""A cached CPU record checked when it is loaded: one L1 and a few DRAM passes against what it says.

A record that was clean when measured can still be wrong for today (measured in a slow moment of the host
that no load counter saw), and a slow host can pass for a quiet one. So before a session uses a cached ERT
record it runs the record's own kernel library (``info.kernel.libraries``, compiled for this fingerprint):

- L1: the update kernel at the fastest L1 size of the record's update sweep, best of 5 calls of ~1 ms;
- DRAM: ``DRAM_PASSES`` single update passes at the DRAM samples' working set, their median;

each compared with the record's update roof of that level (``info.levels.<L>.update_bytes_per_s``, like with
like). About 0.1-0.3 s, most of it touching the DRAM buffer. When other work ran beside it (``clean.PassGuard``)
or too few passes were undisturbed, nothing is judged: the record is used. ``clean.spot_reasons`` decides.
Set ``PYTEST_ROOFLINE_SPOT_CHECK=0`` to skip it (pinned machine files never go through it).
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

from pytest_roofline.characterize import clean

DRAM_PASSES = 6
MIN_CLEAN_DRAM_PASSES = 4
ENV = "PYTEST_ROOFLINE_SPOT_CHECK"



def enabled(environ: Any = os.environ) -> bool:
    return str(environ.get(ENV, "1")).strip().lower() not in ("0", "no", "false", "off")


def plan(info: dict[str, Any]) -> dict[str, Any] | None:
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
    l1_size = int(max(rows, key=lambda r: r.get("bytes_per_s", 0.0))["working_set_bytes"])
    return {"library": libraries[width], "width": width, "chains": int(kernel.get("chains") or 8),
            "threads": int(info.get("threads") or 1), "l1_bytes": l1_size,
            "dram_bytes": int(samples["working_set_bytes"]), "l1_cached": float(l1["update_bytes_per_s"]),
            "dram_cached": float(samples["update_bytes_per_s"])}


def run(info: dict[str, Any], guard: clean.PassGuard | None = None) -> tuple[dict[str, tuple[float, float]] | None, str]:
    """({check: (spot rate, cached rate)}, what was done); None when nothing could be judged (and why)."""
    steps = plan(info)
    if steps is None:
        return None, "no spot check for this record"
    from pytest_roofline.characterize import cpu_ert

    guard = guard or clean.PassGuard.for_cores()
    library = cpu_ert.ErtLibrary({steps["width"]: steps["library"]}, steps["chains"], steps["threads"],
                                 max(steps["dram_bytes"], steps["l1_bytes"]))
    rates = cpu_ert.KernelRates(library, steps["width"])

    def passes() -> tuple[list[float | None], float]:
        dram = [rates.update_rate(steps["dram_bytes"]) for _ in range(DRAM_PASSES)]
        l1 = cpu_ert.measure(library, "fp64", steps["width"], 1, steps["l1_bytes"], target_seconds=0.001,
                             repeats=5)
        return dram, (l1.bandwidth if l1.clean else 0.0)

    (dram, l1_rate), busy = guard.run(passes)
    calm = [rate for rate in dram if rate is not None]
    if busy is not None:
        return None, f"not judged: {busy}"
    if len(calm) < MIN_CLEAN_DRAM_PASSES or not l1_rate:
        return None, "not judged: threads were descheduled during the spot passes"
    return {"L1": (l1_rate, steps["l1_cached"]), "DRAM": (statistics.median(calm), steps["dram_cached"])}, "checked"
