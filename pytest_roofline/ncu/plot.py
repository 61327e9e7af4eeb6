"""Hierarchical roofline chart of ncu kernels (matplotlib with the Agg backend, imported when drawing).

As in the NERSC plots, each kernel is one colour and up to three markers at the same FLOP/s, one per memory level
(L1 ``o``, L2 ``s``, HBM ``v``) at that level's arithmetic intensity. With a machine, its bandwidth roofs and
compute ceilings are drawn too.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_roofline._atomic import write_bytes_atomic
from pytest_roofline.model import Machine
from pytest_roofline.ncu.diagnostics import short_name

LEVEL_MARKERS = {"L1": "o", "L2": "s", "HBM": "v", "DRAM": "v"}
MAX_LABELLED = 10  # kernels beyond the ten slowest are drawn grey, unlabelled


def _points(kernels: Sequence[Any]) -> list[tuple[Any, float, dict[str, float]]]:
    drawn = []
    for kernel in kernels:
        total = float(sum(kernel.flops.values()))
        if not kernel.time_s or total <= 0:
            continue
        ai = {level: total / moved for level, moved in kernel.bytes.items() if moved > 0}
        if ai:
            drawn.append((kernel, total / kernel.time_s, ai))
    return sorted(drawn, key=lambda point: point[0].time_s, reverse=True)


def draw_hierarchical_roofline(
    path: str | os.PathLike[str], kernels: Sequence[Any], machine: Machine | None = None, title: str = ""
) -> Path:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    import numpy as np

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
        axis = np.logspace(math.log10(lo), math.log10(hi), 256)
        top = max(machine.peak_flops.values(), default=None)
        for level, bw in sorted(machine.bandwidth.items(), key=lambda kv: -kv[1]):
            roof = bw * axis if top is None else np.minimum(bw * axis, top)
            ax.plot(axis, roof, lw=1.2, ls="--", label=f"{level} {bw / 1e9:.4g} GB/s")
        for precision, peak in sorted(machine.peak_flops.items(), key=lambda kv: -kv[1]):
            ax.axhline(peak, color="0.4", lw=0.9)
            ax.annotate(f"{precision} {peak / 1e12:.4g} TFLOP/s", (hi, peak), ha="right", va="bottom", fontsize=7)
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
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    if ys:
        ax.set_ylim(10 ** math.floor(math.log10(min(ys) / 3)), 10 ** math.ceil(math.log10(max(ys) * 3)))
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("performance (FLOP/s)")
    skipped = len(kernels) - len(points)
    note = f"{skipped} kernel(s) without time, FLOPs or bytes not drawn" if skipped else ""
    ax.set_title((title + ("\n" if title and note else "") + note) or "hierarchical roofline", fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=6.5, loc="upper left", ncol=1)
    fig.tight_layout()
    buffer = io.BytesIO()
    target = Path(path)
    fig.savefig(buffer, format=(target.suffix.lstrip(".") or "png"))
    plt.close(fig)
    return write_bytes_atomic(target, buffer.getvalue())
