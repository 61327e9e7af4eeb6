"""Roofline charts (matplotlib, imported only when a chart is drawn)."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path

from pytest_roofline._atomic import write_bytes_atomic
from pytest_roofline.model import KernelSample, Machine, Verdict, lower_bound
from pytest_roofline.report import si

_LEVEL_MARKERS = {"L1": "s", "L2": "^", "L3": "D", "DRAM": "o", "HBM": "o"}


def _ai_range(points: Sequence[float], machine: Machine) -> tuple[float, float]:
    ridges = [peak / bw for peak in machine.peak_flops.values() for bw in machine.bandwidth.values()]
    values = [v for v in (*points, *ridges) if v > 0]
    low = min(values, default=0.1) / 10
    high = max(values, default=10.0) * 10
    return 10 ** math.floor(math.log10(low)), 10 ** math.ceil(math.log10(high))


def draw_roofline(
    path: Path,
    machine: Machine,
    kernels: Sequence[KernelSample],
    verdict: Verdict | None = None,
    *,
    title: str = "",
    min_fraction: float | None = None,
) -> Path:
    """Draw every ceiling of ``machine``, the kernels sized by time, the measured point and the threshold."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    import numpy as np

    points: list[tuple[str, str, float, float, float, bool]] = []  # name, level, ai, flop/s, weight, timed
    no_flop_time = 0.0
    for kernel in kernels:
        bound = lower_bound(kernel.flops, kernel.bytes, machine)
        if kernel.total_flops <= 0:
            no_flop_time += kernel.time_s if kernel.time_s is not None else bound.t_min
            continue
        timed = kernel.time_s is not None
        seconds = kernel.time_s if kernel.time_s is not None else bound.t_min  # untimed: drawn on their roof
        if not seconds:
            continue
        for level, moved in kernel.bytes.items():
            if moved > 0:
                points.append((kernel.name, level, kernel.total_flops / moved, kernel.total_flops / seconds,
                               seconds, timed))

    region_ai = verdict.ai if verdict else {}
    lo, hi = _ai_range([p[2] for p in points] + list(region_ai.values()), machine)
    ai = np.logspace(math.log10(lo), math.log10(hi), 256)
    top = max(machine.peak_flops.values(), default=max(machine.bandwidth.values()) * hi)

    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (level, bw) in enumerate(sorted(machine.bandwidth.items(), key=lambda kv: -kv[1])):
        ax.plot(ai, np.minimum(bw * ai, top), color=colors[i % len(colors)], lw=1.2,
                label=f"{level} {si(bw, 'B/s')}")
    for precision, peak in sorted(machine.peak_flops.items(), key=lambda kv: -kv[1]):
        ax.axhline(peak, color="0.35", lw=1.0, ls="-")
        ax.annotate(f"{precision} {si(peak, 'FLOP/s')}", (hi, peak), ha="right", va="bottom", fontsize=8)

    if points:
        total = sum(p[4] for p in points) or 1.0
        for name, level, x, y, weight, timed in points:
            size = 30 + 600 * weight / total
            marker = _LEVEL_MARKERS.get(level, "o")
            ax.scatter([x], [y], s=size, marker=marker, alpha=0.55 if timed else 0.35,
                       facecolors="tab:blue" if timed else "none", edgecolors="tab:blue")
    if verdict is not None and verdict.time_s > 0 and verdict.total_flops > 0:
        for level, x in region_ai.items():
            ax.scatter([x], [verdict.achieved_flops_per_s], marker="*", s=320, color="tab:red", zorder=5,
                       label=f"measured ({level} AI): fraction {verdict.fraction:.2f}")
        if not region_ai:  # no bytes counted: the AI is unknown, so show the rate alone
            ax.axhline(verdict.achieved_flops_per_s, color="tab:red", ls=":", lw=1.5,
                       label=f"measured {si(verdict.achieved_flops_per_s, 'FLOP/s')} (no bytes counted): "
                             f"fraction {verdict.fraction:.2g}")
        bound_level = verdict.bound_level
        if min_fraction is not None and bound_level is not None:
            # The threshold follows the roof that binds: the bound level's slope, capped by the peak of the
            # bound precision (or, when memory-bound, of the precision doing most of the FLOPs).
            if verdict.bound.startswith("compute:"):
                precision = verdict.bound.split(":", 1)[1]
            else:
                precision = max(verdict.flops, key=lambda p: verdict.flops[p], default="")
            roof = machine.peak_flops.get(precision, top)
            ax.plot(ai, min_fraction * np.minimum(machine.bandwidth_for(bound_level) * ai, roof), color="tab:red",
                    ls="--", lw=1.0,
                    label=f"min_fraction {min_fraction:g} of the {bound_level}/{precision or 'peak'} roof")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("performance (FLOP/s)")
    subtitle = []
    if points:
        subtitle.append("hollow: op on its roof (not timed one by one); size: share of time")
    if no_flop_time > 0:
        subtitle.append(f"{no_flop_time * 1e3:.3g} ms in kernels with no FLOPs (not drawn)")
    ax.set_title(title + ("\n" + "; ".join(subtitle) if subtitle else ""), fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return write_bytes_atomic(path, buffer.getvalue())
