"""Roofline charts (matplotlib, imported only when a chart is drawn).

One place draws a machine's ceilings (:func:`draw_ceilings`) for every chart the project makes: a failing
test's chart, ``characterize --plot`` and ``import-ncu --plot``.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_roofline._atomic import write_bytes_atomic
from pytest_roofline.model import KernelSample, Machine, Verdict, lower_bound
from pytest_roofline.model.units import si

_LEVEL_MARKERS = {"L1": "s", "L2": "^", "L3": "D", "DRAM": "o", "HBM": "o"}


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)  # files only; never needs a display
    import matplotlib.pyplot as plt

    return plt


def ai_range(points: Sequence[float], machine: Machine | None) -> tuple[float, float]:
    """Decades of arithmetic intensity that hold the points and every ridge point of the machine."""
    ridges = [peak / bw for peak in machine.peak_flops.values() for bw in machine.bandwidth.values()] if machine else []
    values = [v for v in (*points, *ridges) if v > 0]
    low = min(values, default=0.1) / 10
    high = max(values, default=10.0) * 10
    return 10 ** math.floor(math.log10(low)), 10 ** math.ceil(math.log10(high))


def isa_ceilings(machine: Machine) -> list[tuple[str, float]]:
    """Per-vector-width compute peaks below the roof (e.g. "fp64 256-bit"), from the characterization."""
    out: list[tuple[str, float]] = []
    for precision, by_width in dict(machine.info.get("isa_peaks") or {}).items():
        roof = machine.peak_flops.get(precision)
        for width, peak in dict(by_width).items():
            if roof and 0 < float(peak) < 0.97 * roof:  # the widest width is the roof itself
                out.append((f"{precision} {width}-bit", float(peak)))
    return out


def draw_ceilings(ax: Any, machine: Machine, lo: float, hi: float) -> None:
    """Every bandwidth diagonal (capped at the highest peak), every compute roof and the ISA ceilings."""
    import numpy as np

    ai = np.logspace(math.log10(lo), math.log10(hi), 256)
    top = max(machine.peak_flops.values(), default=max(machine.bandwidth.values(), default=1.0) * hi)
    colors = pyplot().rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (level, bw) in enumerate(sorted(machine.bandwidth.items(), key=lambda kv: -kv[1])):
        ax.plot(ai, np.minimum(bw * ai, top), color=colors[i % len(colors)], lw=1.2,
                label=f"{level} {si(bw, 'B/s')}")
    for precision, peak in sorted(machine.peak_flops.items(), key=lambda kv: -kv[1]):
        ax.axhline(peak, color="0.35", lw=1.0, ls="-")
        emulated = (machine.info.get("emulated") or {}).get(precision)
        suffix = f" (emulated: {emulated.get('roof_from', 'fp32')} roof)" if isinstance(emulated, dict) else ""
        ax.annotate(f"{precision} {si(peak, 'FLOP/s')}{suffix}", (hi, peak), ha="right", va="bottom", fontsize=8)
    # ISA ceilings are labelled at the left, next to the fastest diagonal, so they never sit on top of the
    # roof labels at the right; near-equal ones (fp64 256-bit = fp32 128-bit) share one label.
    fastest = max(machine.bandwidth.values(), default=None)
    groups: list[list[tuple[str, float]]] = []
    for name, peak in sorted(isa_ceilings(machine), key=lambda item: item[1]):
        if groups and peak <= groups[-1][0][1] * 1.05:
            groups[-1].append((name, peak))
        else:
            groups.append([(name, peak)])
    for group in groups:
        peak = group[0][1]
        ax.axhline(peak, color="0.55", lw=0.9, ls=":")
        x = max(lo, peak / fastest * 1.3) if fastest else lo
        ax.annotate(" / ".join(f"{name} {si(value, 'FLOP/s')}" for name, value in group), (x, peak), ha="left",
                    va="bottom", fontsize=7, color="0.4")


def save(fig: Any, path: Path) -> Path:
    """Write the figure atomically, in the format the file name asks for (png, svg, pdf)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format=Path(path).suffix.lstrip(".") or "png")
    pyplot().close(fig)
    return write_bytes_atomic(path, buffer.getvalue())


def finish_axes(ax: Any, lo: float, hi: float, title: str) -> None:
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.25)


def plot_machine(machine: Machine, path: str | Path) -> Path:
    """The machine's hierarchical roofline alone: every level, every precision, the ISA ceilings."""
    lo, hi = ai_range([], machine)
    fig, ax = pyplot().subplots(figsize=(9, 6), dpi=110)
    draw_ceilings(ax, machine, lo, hi)
    finish_axes(ax, lo, hi, machine.name)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return save(fig, Path(path))


Point = tuple[str, str, float, float, float, bool]  # name, level, AI, FLOP/s, time (size), timed one by one
EdgePoint = tuple[str, float, float]  # a timed op with no FLOPs: level, bytes/s, time (size)


def chart_points(kernels: Sequence[KernelSample], machine: Machine) -> tuple[list[Point], list[EdgePoint], float]:
    """Where each kernel goes on the chart: kernels with FLOPs at (AI, FLOP/s) per level that moved bytes (timed
    ones by their time, untimed ones on their roof); timed kernels with no FLOPs at the left edge by bandwidth;
    and the time of the rest (untimed, or no bytes), which is not drawn."""
    points: list[Point] = []
    edge: list[EdgePoint] = []
    no_flop_time = 0.0
    for kernel in kernels:
        bound = lower_bound(kernel.flops, kernel.bytes, machine)
        if kernel.total_flops <= 0:
            if kernel.time_s is not None:  # timed: drawn at the left edge by the bandwidth it reached
                by_level = {lv: b for lv, b in kernel.bytes.items() if b > 0}
                if by_level:
                    level = max(by_level, key=lambda lv: by_level[lv])
                    edge.append((level, by_level[level] / kernel.time_s, kernel.time_s))
                    continue
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
    return points, edge, no_flop_time


def draw_roofline(
    path: Path,
    machine: Machine,
    kernels: Sequence[KernelSample],
    verdict: Verdict | None = None,
    *,
    title: str = "",
    min_fraction: float | None = None,
    baseline_fraction: float | None = None,
    reference: tuple[Mapping[str, float], float, str] | None = None,
) -> Path:
    """Draw every ceiling of ``machine``, the kernels sized by time, the measured point and the threshold.

    ``baseline_fraction``: the baseline's point too, at the same arithmetic intensity (the same work), its
    performance scaled from the measured one by the ratio of the fractions (the roof is the same).
    ``reference``: another measurement's point, ``(AI per level, FLOP/s, label)`` (REF's, under
    ``--roofline-compare``: its own work, so its own intensity), joined to the measured one by an arrow."""
    import numpy as np

    points, edge, no_flop_time = chart_points(kernels, machine)
    region_ai = verdict.ai if verdict else {}
    lo, hi = ai_range([p[2] for p in points] + list(region_ai.values()), machine)
    ai = np.logspace(math.log10(lo), math.log10(hi), 256)
    top = max(machine.peak_flops.values(), default=max(machine.bandwidth.values()) * hi)

    fig, ax = pyplot().subplots(figsize=(9, 6), dpi=110)
    draw_ceilings(ax, machine, lo, hi)

    total = sum(p[4] for p in points) + sum(e[2] for e in edge) or 1.0
    for name, level, x, y, weight, timed in points:
        size = 30 + 600 * weight / total
        marker = _LEVEL_MARKERS.get(level, "o")
        ax.scatter([x], [y], s=size, marker=marker, alpha=0.55 if timed else 0.35,
                   facecolors="tab:blue" if timed else "none", edgecolors="tab:blue")
    for i, (level, rate, weight) in enumerate(edge):
        # No FLOPs, so no place on the AI axis: at the left edge, at the height its bandwidth reaches there,
        # so its distance below that level's diagonal is its own fraction of the bandwidth roof.
        ax.scatter([lo], [lo * rate], s=30 + 600 * weight / total, marker=_LEVEL_MARKERS.get(level, "o"),
                   alpha=0.55, facecolors="tab:orange", edgecolors="tab:orange", clip_on=False,
                   label="ops with no FLOPs (at the left edge, by bandwidth)" if i == 0 else None)
    if verdict is not None and verdict.time_s > 0 and verdict.total_flops > 0:
        for level, x in region_ai.items():
            ax.scatter([x], [verdict.achieved_flops_per_s], marker="*", s=320, color="tab:red", zorder=5,
                       label=f"measured ({level} AI): fraction {verdict.fraction:.2f}")
        if baseline_fraction is not None and verdict.fraction > 0:
            baseline_rate = verdict.achieved_flops_per_s * baseline_fraction / verdict.fraction
            for level, x in region_ai.items():
                ax.scatter([x], [baseline_rate], marker="P", s=200, color="tab:green", zorder=4,
                           label=f"baseline ({level} AI): fraction {baseline_fraction:.2f}")
            if not region_ai:
                ax.axhline(baseline_rate, color="tab:green", ls=":", lw=1.5,
                           label=f"baseline {si(baseline_rate, 'FLOP/s')}: fraction {baseline_fraction:.2g}")
        if reference is not None:
            ref_ai, ref_rate, ref_label = reference
            for level, x in region_ai.items():
                if ref_ai.get(level):
                    ax.scatter([ref_ai[level]], [ref_rate], marker="P", s=200, color="tab:green", zorder=4,
                               label=f"{ref_label} ({level} AI)")
                    ax.annotate("", xy=(x, verdict.achieved_flops_per_s), xytext=(ref_ai[level], ref_rate),
                                arrowprops={"arrowstyle": "->", "color": "tab:gray", "lw": 1.5}, zorder=3)
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
    subtitle = []
    if any(p[5] for p in points) or edge:
        subtitle.append("solid: op timed one by one; size: share of time"
                        + ("; hollow: not timed, on its roof" if not all(p[5] for p in points) else ""))
    elif points:
        subtitle.append("hollow: op on its roof (not timed one by one); size: share of time")
    if no_flop_time > 0:
        subtitle.append(f"{no_flop_time * 1e3:.3g} ms in kernels with no FLOPs (not drawn)")
    finish_axes(ax, lo, hi, title + ("\n" + "; ".join(subtitle) if subtitle else ""))
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return save(fig, path)
