"""Hierarchical roofline chart of ncu kernels (matplotlib with the Agg backend, imported when drawing).

As in the NERSC plots, each kernel is one colour and up to three markers at the same FLOP/s, one per memory level
(L1 ``o``, L2 ``s``, HBM ``v``) at that level's arithmetic intensity. With a machine, its bandwidth roofs and
compute ceilings are drawn too.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_roofline.counters.ncu.diagnostics import short_name
from pytest_roofline.model import Machine
from pytest_roofline.output.chart import draw_ceilings, finish_axes, pyplot, save

if TYPE_CHECKING:
    from pytest_roofline.counters.ncu.diagnostics import Kernel

LEVEL_MARKERS = {"L1": "o", "L2": "s", "HBM": "v", "DRAM": "v"}
MAX_LABELLED = 10  # kernels beyond the ten slowest are drawn grey, unlabelled


def _points(kernels: Sequence[Kernel]) -> list[tuple[Kernel, float, dict[str, float]]]:
    drawn = []
    for kernel in kernels:
        total = float(sum(kernel.flops.values()))
        if not kernel.time_s or total <= 0:
            continue
        ai = {level: total / moved for level, moved in kernel.bytes.items() if moved > 0}
        if ai:
            drawn.append((kernel, total / kernel.time_s, ai))
    return sorted(drawn, key=lambda point: point[0].time_s or 0.0, reverse=True)  # each drawn one has a time


def draw_hierarchical_roofline(
    path: str | os.PathLike[str], kernels: Sequence[Kernel], machine: Machine | None = None, title: str = ""
) -> Path:
    plt = pyplot()
    points = _points(kernels)
    xs = [x for _, _, ai in points for x in ai.values()]
    ys = [y for _, y, _ in points]
    if machine is not None:
        xs += [peak / bw for peak in machine.peak_flops.values() for bw in machine.bandwidth.values()]
        ys += list(machine.peak_flops.values())
    lo = 10 ** math.floor(math.log10(min(xs, default=0.1) / 3))
    hi = 10 ** math.ceil(math.log10(max(xs, default=100.0) * 3))

    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=110)
    if machine is not None:
        draw_ceilings(ax, machine, lo, hi)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for rank, (kernel, rate, kernel_ai) in enumerate(points):
        labelled = rank < MAX_LABELLED
        color = colors[rank % len(colors)] if labelled else "0.6"
        for index, (level, x) in enumerate(sorted(kernel_ai.items())):
            ax.scatter([x], [rate], marker=LEVEL_MARKERS.get(level, "o"), s=42, facecolors="none",
                       edgecolors=color, linewidths=1.3,
                       label=f"{short_name(kernel.name, 40)} (x{kernel.launches})" if labelled and index == 0
                       else None)
    for level, marker in (("L1", "o"), ("L2", "s"), ("HBM", "v")):
        ax.scatter([], [], marker=marker, facecolors="none", edgecolors="k", label=f"{level} AI")
    skipped = len(kernels) - len(points)
    note = f"{skipped} kernel(s) without time, FLOPs or bytes not drawn" if skipped else ""
    finish_axes(ax, lo, hi, (title + ("\n" if title and note else "") + note) or "hierarchical roofline")
    if ys:
        ax.set_ylim(10 ** math.floor(math.log10(min(ys) / 3)), 10 ** math.ceil(math.log10(max(ys) * 3)))
    ax.legend(fontsize=6.5, loc="upper left", ncol=1)
    fig.tight_layout()
    return save(fig, Path(path))
