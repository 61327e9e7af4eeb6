"""Roofline charts (matplotlib, imported only when a chart is drawn).

One place draws a machine's ceilings (:func:`draw_ceilings`) for every chart the project makes: a failing
test's chart, ``characterize --plot`` and ``import-ncu --plot``.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict
from weakref import WeakKeyDictionary

from pytest_roofline._atomic import write_bytes_atomic
from pytest_roofline._safe_text import printable
from pytest_roofline.counters.ncu.diagnostics import kernel_name
from pytest_roofline.model import KernelSample, Machine, Verdict, lower_bound
from pytest_roofline.model.units import si
from pytest_roofline.output.kernel_view import is_tensor_kernel, shares
from pytest_roofline.output.kernel_view import is_tensor_precision as is_tensor
from pytest_roofline.output.label_place import Candidate, Label, box_of, line_boxes, place_labels, renderer_of

if TYPE_CHECKING:  # matplotlib is imported only when a chart is drawn
    from matplotlib import RcParams
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Annotation
    from typing_extensions import Unpack

_LEVEL_MARKERS = {"L1": "s", "L2": "^", "L3": "D", "DRAM": "o", "HBM": "o"}
# One colour per kernel (the longest first, Okabe-Ito, colour-blind safe); the rest share grey.
KERNEL_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")


class Pyplot(Protocol):
    """What this package uses of ``matplotlib.pyplot`` (the module satisfies it)."""

    @property
    def rcParams(self) -> RcParams: ...  # pyplot's name

    def subplots(self, *, figsize: tuple[float, float], dpi: float) -> tuple[Figure, Axes]: ...

    def close(self, fig: Figure) -> None: ...


def pyplot() -> Pyplot:
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


@dataclass(frozen=True)
class Ceiling:
    """One drawn line: every name whose value prints the same (``fp16`` and ``fp16_tensor`` of an older record,
    an emulated ``fp16`` and the ``fp32`` roof it runs on) shares one line and one label."""

    names: tuple[str, ...]
    value: float
    tensor: bool
    label: str


def _grouped(values: Mapping[str, float], unit: str, suffix: Callable[[str], str]) -> list[Ceiling]:
    groups: dict[str, list[tuple[str, float]]] = {}
    for name, value in values.items():
        groups.setdefault(si(value, unit), []).append((name, value))
    out = []
    for shown, members in groups.items():
        # CUDA-core / exact names first, then the Tensor Core ones, each alphabetically
        members.sort(key=lambda m: (is_tensor(m[0]), suffix(m[0]) != "", m[0]))
        names = tuple(m[0] for m in members)
        label = " / ".join(name + suffix(name) for name in names) + f" {shown}"
        out.append(Ceiling(names, max(m[1] for m in members), any(is_tensor(n) for n in names), label))
    return sorted(out, key=lambda c: -c.value)


def compute_ceilings(machine: Machine) -> list[Ceiling]:
    """The machine's distinct compute roofs, highest first."""
    emulated = machine.info.get("emulated") or {}
    return _grouped(machine.peak_flops, "FLOP/s",
                    lambda name: " (emulated)" if isinstance(emulated.get(name), Mapping) else "")


def memory_ceilings(machine: Machine) -> list[Ceiling]:
    """The machine's distinct bandwidth roofs, fastest first (L1, L2, ..., DRAM/HBM)."""
    return _grouped(machine.bandwidth, "B/s", lambda name: "")


# Labels waiting for the figure's final layout: placed apart by :func:`save`, when pixel sizes are known.
_PENDING: WeakKeyDictionary[Axes, list[tuple[int, Label, float | None]]] = WeakKeyDictionary()


def add_label(ax: Axes, label: Label, priority: int = 0, line_y: float | None = None) -> None:
    """Queue a label for placement (lower ``priority`` first); ``line_y``: the horizontal line it names."""
    _PENDING.setdefault(ax, []).append((priority, label, line_y))


def _roof_candidates(y: float, x0: float, x1: float, ha: str = "right") -> list[Candidate]:
    """Along a horizontal line from ``x0`` to ``x1``: at its end (right, or left for ``ha="left"``), above then
    below the line, then stepping along it."""
    steps = 7
    span = math.log10(x1 / x0) if x1 > x0 else 0.0
    xs = [x1 / 10 ** (span * i / steps) for i in range(steps)] if ha == "right" else \
        [x0 * 10 ** (span * i / steps) for i in range(steps)]
    return [Candidate(x, y, ha, va, 0.0, dy) for x in xs for va, dy in (("bottom", 2.0), ("top", -2.0))]


def draw_ceilings(ax: Axes, machine: Machine, lo: float, hi: float) -> list[Ceiling]:
    """Every bandwidth diagonal (capped at the highest peak), every distinct compute roof from the fastest
    level's ridge to the right (CUDA-core/vector roofs solid, Tensor Core roofs dashed) and the ISA ceilings;
    their labels are queued and placed apart when the chart is saved."""
    import numpy as np

    ai = np.logspace(math.log10(lo), math.log10(hi), 256)
    top = max(machine.peak_flops.values(), default=max(machine.bandwidth.values(), default=1.0) * hi)
    colors = pyplot().rcParams["axes.prop_cycle"].by_key()["color"]
    for i, level in enumerate(memory_ceilings(machine)):
        ax.plot(ai, np.minimum(level.value * ai, top), color=colors[i % len(colors)], lw=1.4, label=level.label)
    fastest = max(machine.bandwidth.values(), default=None)
    roofs = compute_ceilings(machine)
    for roof in roofs:
        start = max(lo, roof.value / fastest) if fastest else lo
        ax.plot([start, hi], [roof.value, roof.value], color="0.25" if roof.tensor else "0.35", lw=1.1,
                ls=(0, (5, 2.5)) if roof.tensor else "-")
    if any(r.tensor for r in roofs):  # Nsight Compute's distinction: one legend line per kind of unit
        ax.plot([], [], color="0.35", lw=1.1, ls="-", label="CUDA-core roofs (FMA)")
        ax.plot([], [], color="0.25", lw=1.1, ls=(0, (5, 2.5)), label="Tensor Core roofs (GEMM)")
    # ISA ceilings: near-equal ones (fp64 256-bit = fp32 128-bit) share one line and label, placed from the
    # left; one that prints as a compute roof's value is named on that roof's label instead of a second line.
    shown = {si(roof.value, "FLOP/s"): roof for roof in roofs}
    on_roof: dict[str, list[str]] = {}
    groups: list[list[tuple[str, float]]] = []
    for name, peak in sorted(isa_ceilings(machine), key=lambda item: item[1]):
        if si(peak, "FLOP/s") in shown:
            on_roof.setdefault(si(peak, "FLOP/s"), []).append(name)
        elif groups and peak <= groups[-1][0][1] * 1.05:
            groups[-1].append((name, peak))
        else:
            groups.append([(name, peak)])
    for i, group in enumerate(groups):
        peak = group[0][1]
        start = max(lo, peak / fastest) if fastest else lo
        ax.plot([start, hi], [peak, peak], color="0.55", lw=0.9, ls=":",
                label="narrower vector widths" if i == 0 else None)
        values = {si(value, "FLOP/s") for _, value in group}
        text = (" / ".join(name for name, _ in group) + f" {values.pop()}" if len(values) == 1 else
                " / ".join(f"{name} {si(value, 'FLOP/s')}" for name, value in group))
        add_label(ax, Label(text, _roof_candidates(peak, start * 1.3, hi, ha="left"),
                            {"fontsize": 7, "color": "0.4"}), 1, peak)
    for roof in roofs:
        start = max(lo, roof.value / fastest) if fastest else lo
        names = on_roof.get(si(roof.value, "FLOP/s"))
        text = roof.label if not names else roof.label.replace(
            f" {si(roof.value, 'FLOP/s')}", " / " + " / ".join(names) + f" {si(roof.value, 'FLOP/s')}")
        add_label(ax, Label(text, _roof_candidates(roof.value, start, hi), {"fontsize": 7.5}), 0, roof.value)
    return roofs


def place_pending(fig: Figure) -> list[Annotation]:
    """Place every queued label of ``fig``'s axes apart (after the layout is final); the text artists."""
    import numpy as np

    placed: list[Annotation] = []
    for ax in fig.axes:
        pending = sorted(_PENDING.pop(ax, []), key=lambda item: item[0])
        if not pending:
            continue
        lines = ax.get_lines()
        ys = [y for _, _, y in pending if y is not None]
        if ys and ax.get_yscale() == "log":  # room above the highest roof for its label
            low, high = ax.get_ylim()
            ax.set_ylim(low, max(high, max(ys) * 2.5))
        # No draw first: the layout is set (tight_layout ran, no layout engine moves anything at a draw), the
        # limits are final, and the renderer measures the legend's box and the markers' extents on its own;
        # a draw here rendered the whole figure once more than savefig does (a third of a chart's time).
        legend = ax.get_legend()
        renderer = renderer_of(fig)
        obstacles = [box_of(legend, renderer, pad=2.0)] if legend is not None else []
        # each line's data as given (a list or an array; typed ArrayLike), as arrays: they have a length
        data = [(np.asarray(line.get_xdata()), np.asarray(line.get_ydata())) for line in lines]
        covered = [box for xs, ys in data if len(xs) for box in line_boxes(ax, xs, ys)]
        for collection in ax.collections:  # markers: a label beside one must not cover another
            extent = collection.get_window_extent(renderer)
            if extent.width > 0 and extent.height > 0 and extent.width < 200 and extent.height < 200:
                covered.append((extent.x0, extent.y0, extent.x1, extent.y1))
        placed += place_labels(ax, [label for _, label, _ in pending], obstacles, covered)
    return placed


def save(fig: Figure, path: Path) -> Path:
    """Write the figure atomically, in the format the file name asks for (png, svg, pdf)."""
    place_pending(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format=Path(path).suffix.lstrip(".") or "png")
    pyplot().close(fig)
    return write_bytes_atomic(path, buffer.getvalue())


def finish_axes(ax: Axes, lo: float, hi: float, title: str) -> None:
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.set_title(title.replace("$", r"\$"), fontsize=9)  # a node id's "$" must not start math mode
    ax.grid(True, which="both", alpha=0.25)


def machine_figure(machine: Machine) -> Figure:
    """The machine's hierarchical roofline alone: every level, every precision, the ISA ceilings (labels
    queued; :func:`save` places them)."""
    lo, hi = ai_range([], machine)
    fig, ax = pyplot().subplots(figsize=(9, 6), dpi=110)
    draw_ceilings(ax, machine, lo, hi)
    finish_axes(ax, lo, hi, machine.name)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def plot_machine(machine: Machine, path: str | Path) -> Path:
    return save(machine_figure(machine), Path(path))


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


MATMUL_OPS = ("mm", "addmm", "bmm", "baddbmm", "mv", "addmv", "matmul", "linear", "dot", "vdot")
TOP_OPS_NAMED = 4  # the ops that took the most time are named beside their markers


def op_label(name: str, launches: int = 1, width: int = 48) -> str:
    """A marker's name: ``1024 launches of a 1×64 @ 64×64 matmul`` for the analytic counter's
    ``aten.mm.default[1x64,64x64]``; ncu kernels by :func:`kernel_name`, long names shortened from the middle.
    Names are untrusted: no control characters, and ``$`` cannot start matplotlib's math mode."""
    name = printable(name)
    # the analytic counter's op[shape,shape] (a C++ name may hold brackets too: lambdas, arrays)
    op, bracket, rest = name.partition("[") if re.fullmatch(r"[\w.]+\[[^\[\]]*\]", name) else (name, "", "")
    short = op.removeprefix("aten.").removesuffix(".default").split(".")[0]
    shapes = [shape.replace("x", "×") for shape in rest.rstrip("]").split(",")] if bracket else []
    if short in MATMUL_OPS and shapes:
        text = f"{' @ '.join(shapes[:2])} matmul"
    elif short.startswith("conv") and shapes:
        text = f"{shapes[0]} conv"
    elif bracket:
        text = f"{short} [{', '.join(shapes[:2])}{', …' if len(shapes) > 2 else ''}]"
    else:
        text = kernel_name(name)
    if len(text) > width:
        text = text[: width // 2 - 1] + "…" + text[-(width // 2):]
    text = text.replace("$", r"\$")
    if launches > 1:
        return f"{launches} launches of {'a ' if bracket else ''}{text}"
    return text


def _op_candidates(x: float, y: float, size: float) -> list[Candidate]:
    """Beside a marker of ``size`` (points squared): right, left, above, below, then a little further out."""
    out = []
    radius = math.sqrt(size) / 2
    for gap in (radius + 3.0, radius + 12.0):
        out += [Candidate(x, y, "left", "center", gap, 0.0), Candidate(x, y, "right", "center", -gap, 0.0),
                Candidate(x, y, "center", "bottom", 0.0, gap), Candidate(x, y, "center", "top", 0.0, -gap),
                Candidate(x, y, "left", "bottom", gap, gap), Candidate(x, y, "left", "top", gap, -gap),
                Candidate(x, y, "right", "bottom", -gap, gap), Candidate(x, y, "right", "top", -gap, -gap)]
    return out


class ChartOptions(TypedDict, total=False):
    """:func:`roofline_figure`'s keywords, for the functions that pass them on."""

    title: str
    min_fraction: float | None
    baseline_fraction: float | None
    reference: tuple[Mapping[str, float], float, str] | None
    caption: Sequence[str]


def draw_roofline(path: Path, machine: Machine, kernels: Sequence[KernelSample], verdict: Verdict | None = None,
                  **options: Unpack[ChartOptions]) -> Path:
    """Draw :func:`roofline_figure` into ``path``."""
    return save(roofline_figure(machine, kernels, verdict, **options), path)


def roofline_figure(
    machine: Machine,
    kernels: Sequence[KernelSample],
    verdict: Verdict | None = None,
    *,
    title: str = "",
    min_fraction: float | None = None,
    baseline_fraction: float | None = None,
    reference: tuple[Mapping[str, float], float, str] | None = None,
    caption: Sequence[str] = (),
) -> Figure:
    """Every ceiling of ``machine``, the kernels sized by time, the measured point and the threshold.

    ``baseline_fraction``: the baseline's point too, at the same arithmetic intensity (the same work), its
    performance scaled from the measured one by the ratio of the fractions (the roof is the same).
    ``reference``: another measurement's point, ``(AI per level, FLOP/s, label)`` (REF's, under
    ``--roofline-compare``: its own work, so its own intensity), joined to the measured one by an arrow.
    ``caption``: lines under the chart (the diagnosis: the failure message's first lines). The
    :data:`TOP_OPS_NAMED` ops that took the most time are named beside their markers."""
    import numpy as np

    points, edge, no_flop_time = chart_points(kernels, machine)
    region_ai = verdict.ai if verdict else {}
    lo, hi = ai_range([p[2] for p in points] + list(region_ai.values()), machine)
    ai = np.logspace(math.log10(lo), math.log10(hi), 256)
    top = max(machine.peak_flops.values(), default=max(machine.bandwidth.values()) * hi)

    fig, ax = pyplot().subplots(figsize=(9, 6), dpi=110)
    draw_ceilings(ax, machine, lo, hi)

    total = sum(p[4] for p in points) + sum(e[2] for e in edge) or 1.0
    # one colour per kernel, longest first (as the paper reads a step kernel by kernel); a black edge marks
    # a Tensor Core kernel, the marker's shape its level (its three markers are one kernel at L1, L2, HBM)
    order = sorted({p[0] for p in points}, key=lambda n: -max(p[4] for p in points if p[0] == n))
    colour = {name: KERNEL_COLOURS[i] if i < len(KERNEL_COLOURS) else "0.6" for i, name in enumerate(order)}
    tensor = {kernel.name for kernel in kernels if is_tensor_kernel(kernel)}
    for name, level, x, y, weight, timed in points:
        size = 30 + 600 * weight / total
        marker = _LEVEL_MARKERS.get(level, "o")
        ax.scatter([x], [y], s=size, marker=marker, alpha=0.6 if timed else 0.35,
                   facecolors=colour[name] if timed else "none",
                   edgecolors="black" if name in tensor else colour[name], linewidths=1.6 if name in tensor else 0.8)
    levels = sorted({p[1] for p in points}, key=lambda lv: list(_LEVEL_MARKERS).index(lv) if lv in _LEVEL_MARKERS
                    else len(_LEVEL_MARKERS))
    if len(levels) > 1:  # one legend entry per level's marker shape
        for level in levels:
            ax.scatter([], [], marker=_LEVEL_MARKERS.get(level, "o"), s=40, facecolors="none", edgecolors="0.3",
                       label=f"kernel at its {level} intensity")
    if tensor & set(colour):
        ax.scatter([], [], marker="o", s=40, facecolors="none", edgecolors="black", linewidths=1.6,
                   label="black edge: Tensor Core kernel")
    launches = {kernel.name: kernel.launches for kernel in kernels}
    named: set[str] = set()
    for name, _, x, y, weight, _ in sorted(points, key=lambda p: -p[4]):  # one label per op, at one level
        if name in named or len(named) >= TOP_OPS_NAMED:
            continue
        named.add(name)
        add_label(ax, Label(op_label(name, launches.get(name, 1)), _op_candidates(x, y, 30 + 600 * weight / total),
                            {"fontsize": 7, "color": colour.get(name, "tab:blue")}), 2 + len(named))
    for i, (level, rate, weight) in enumerate(edge):
        # No FLOPs, so no place on the AI axis: at the left edge, at the height its bandwidth reaches there,
        # so its distance below that level's diagonal is its own fraction of the bandwidth roof.
        ax.scatter([lo], [lo * rate], s=30 + 600 * weight / total, marker=_LEVEL_MARKERS.get(level, "o"),
                   alpha=0.55, facecolors="tab:orange", edgecolors="tab:orange", clip_on=False,
                   label="ops with no FLOPs (at the left edge, by bandwidth)" if i == 0 else None)
    if verdict is not None and verdict.time_s > 0 and verdict.total_flops > 0:
        for i, x in enumerate(region_ai.values()):  # one legend entry for the star at every level
            ax.scatter([x], [verdict.achieved_flops_per_s], marker="*", s=320, color="tab:red", zorder=5,
                       label=f"measured ({'/'.join(region_ai)} AI): fraction {verdict.fraction:.2f}" if i == 0
                       else None)
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
    if any(k.time_s is not None for k in kernels) and len(kernels) > 1:
        subtitle.append(shares(kernels, machine).describe())
    finish_axes(ax, lo, hi, title + ("\n" + "; ".join(subtitle) if subtitle else ""))
    ax.legend(fontsize=7, loc="lower right")
    lines = [line for line in caption if line.strip()][:4]
    if lines:
        # the diagnosis under the chart, so the image alone says why the test failed
        height = 0.022 * len(lines) + 0.015
        fig.text(0.01, 0.008, "\n".join(lines).replace("$", r"\$"), fontsize=7.5, family="monospace",
                 va="bottom", ha="left")
        fig.tight_layout(rect=(0, height, 1, 1))
    else:
        fig.tight_layout()
    return fig
