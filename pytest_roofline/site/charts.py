"""The site's charts: plotly figure specs (plain dicts, drawn by the bundled plotly.js) and SVG sparklines.

Figures are built as dicts rather than ``plotly.graph_objects`` so that a thousand sessions cost no
per-point validation; the tests check every spec against plotly's own schema instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from pytest_roofline.output.kernel_view import is_tensor_precision as is_tensor

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from pytest_roofline.history.chain import Night


# The part of plotly's figure schema these charts use, key by key (mypy checks every key written; the tests
# check the figures against plotly's own schema).
class Font(TypedDict, total=False):
    family: str
    size: int
    color: str


class Title(TypedDict, total=False):
    text: str
    x: float
    font: Font


class Line(TypedDict, total=False):
    color: str | list[str]
    width: float | list[float]
    dash: str
    shape: str


class MarkerStyle(TypedDict, total=False):
    size: float | list[float | None]
    color: str | list[str] | list[int]
    symbol: str
    opacity: float
    line: Line
    colorscale: str
    reversescale: bool
    showscale: bool


class Trace(TypedDict, total=False):
    type: str
    mode: str
    name: str
    x: Sequence[str | float | None]  # ISO times or numbers; None leaves a gap
    y: Sequence[float | None]
    yaxis: str
    text: list[str]
    textposition: str
    customdata: list[str] | list[list[str]]
    hovertemplate: str
    hoverinfo: str
    line: Line
    marker: MarkerStyle
    fill: str
    fillcolor: str


class Shape(TypedDict, total=False):
    type: str
    xref: str
    yref: str
    x0: str | float
    x1: str | float
    y0: float
    y1: float
    fillcolor: str
    line: Line
    layer: str


class Annotation(TypedDict, total=False):
    xref: str
    yref: str
    x: str | float
    y: float
    xanchor: str
    yanchor: str
    text: str
    hovertext: str
    showarrow: bool
    font: Font


class Axis(TypedDict, total=False):
    title: Title
    type: str
    range: list[float]
    rangemode: str
    gridcolor: str
    linecolor: str
    zeroline: bool
    showgrid: bool
    overlaying: str
    side: str
    tickformat: str
    ticksuffix: str
    exponentformat: str


class Legend(TypedDict, total=False):
    orientation: str
    x: float
    y: float


class Layout(TypedDict, total=False):
    title: Title
    font: Font
    height: int
    margin: dict[str, int]
    hovermode: str
    plot_bgcolor: str
    paper_bgcolor: str
    legend: Legend
    shapes: list[Shape]
    annotations: list[Annotation]
    xaxis: Axis
    yaxis: Axis
    yaxis2: Axis


class Figure(TypedDict):
    data: list[Trace]
    layout: Layout

# Colour-blind-safe (Okabe-Ito) colours, one per memory level or precision.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
FAIL = "#D55E00"
POINT = "#0072B2"
FONT: Font = {"family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", "size": 12}


# plotly reads every text it draws (trace names, hover text, annotations, titles, point labels) as a little
# HTML, with ``%{...}`` in a hover template as a field; it turns the entities below back into characters.
_PLOTLY_ENTITIES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "%": "&#37;"})


def plotly_text(value: object) -> str:
    """Text from the history as plotly is to show it: every ``&``, ``<``, ``>`` and ``%`` an entity, so that no
    name (``memory:<img src=x onerror=...>``) becomes markup or a template field. The one way a string read
    from a history reaches a figure."""
    return str(value).translate(_PLOTLY_ENTITIES)


def sig(x: float | None, digits: int = 4) -> float | None:
    """A float rounded to ``digits`` significant digits: the pages carry no noise digits."""
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.{digits}g}")


def si(x: float | None, unit: str = "") -> str:
    """3 significant digits with an SI prefix: 1.23 G, 456 µ, 1.42 P (an H100's fp8 roof in FLOP/s)."""
    if x is None:
        return "—"
    if x == 0:
        return f"0 {unit}".strip()
    exponent = max(-4, min(5, math.floor(math.log10(abs(x)) / 3)))
    prefix = {-4: "p", -3: "n", -2: "µ", -1: "m", 0: "", 1: "k", 2: "M", 3: "G", 4: "T", 5: "P"}[exponent]
    return f"{x / 1000 ** exponent:.3g} {prefix}{unit}".strip()


def _layout(heading: str, **extra: Unpack[Layout]) -> Layout:
    return {"title": {"text": heading, "x": 0.01, "font": {"size": 14}}, "font": FONT, "height": 400,
            "margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "hovermode": "closest",
            "plot_bgcolor": "white", "paper_bgcolor": "white",
            "legend": {"orientation": "h", "y": -0.18, "x": 0}, **extra}


def _axis(label: str, **extra: Unpack[Axis]) -> Axis:
    return {"title": {"text": label}, "gridcolor": "#e5e5e5", "linecolor": "#999", "zeroline": False, **extra}


@dataclass(frozen=True)
class FractionPoint:
    """One session of a test, its strings as read (the figure passes them through :func:`plotly_text`)."""

    time: str  # ISO time of the session's start
    commit: str
    fraction: float
    threshold: float | None
    time_s: float | None
    bound: str | None
    outcome: str
    gate: str | None = None  # the baseline gate's verdict in that session, where it ran


@dataclass(frozen=True)
class Marker:
    """A change point, drawn as a band between the last session before it and the first after; ``label`` and
    ``hover`` as plain text (the figure escapes them)."""

    start: str
    end: str
    label: str
    hover: str


def fraction_figure(points: Sequence[FractionPoint], baseline: tuple[float, float, float] | None,
                    markers: Sequence[Marker], baseline_times: Sequence[str] = (),
                    baseline_label: str = "baseline") -> Figure:
    """Fraction over time with hover details, the threshold, the baseline band and change points; the time per
    call on a second axis (at the same fraction, more work reads as more time only there).

    ``baseline_times``: the times of the sessions the band is drawn from: the band spans from the first of
    them to the last point, and those sessions' points are ringed."""
    failed = [p.outcome in ("failed", "error") for p in points]
    data: list[Trace] = [{
        "type": "scatter", "mode": "lines+markers", "name": "fraction",
        "x": [p.time for p in points], "y": [sig(p.fraction) for p in points],
        "customdata": [[plotly_text(p.commit), si(p.time_s, "s"), plotly_text(p.bound or "—"),
                        plotly_text(p.outcome), plotly_text(p.gate or "not run")] for p in points],
        "hovertemplate": ("%{x|%Y-%m-%d %H:%M} UTC<br>commit %{customdata[0]}<br>fraction %{y:.3f}"
                          "<br>time per call %{customdata[1]}<br>bound %{customdata[2]}"
                          "<br>%{customdata[3]}<br>baseline gate: %{customdata[4]}<extra></extra>"),
        "line": {"color": POINT, "width": 1},
        # a year of nightly sessions stays readable: smaller dots as the series grows
        "marker": {"size": 5 if len(points) <= 150 else 3, "color": [FAIL if f else POINT for f in failed]},
    }]
    thresholds = [p.threshold for p in points]
    if any(t is not None for t in thresholds):
        data.append({"type": "scatter", "mode": "lines", "name": "threshold (min_fraction)",
                     "x": [p.time for p in points], "y": thresholds, "line": {"color": FAIL, "dash": "dash",
                                                                              "shape": "hv", "width": 1.5},
                     "hovertemplate": "threshold %{y:.3f}<extra></extra>"})
    shapes: list[Shape] = []
    annotations: list[Annotation] = []
    if baseline is not None:
        median, low, high = baseline
        # from the first baseline session on (the band says what those sessions measured, not what came before)
        span: Shape = ({"xref": "x", "x0": min(baseline_times), "x1": max(p.time for p in points)}
                                if baseline_times and points else {"xref": "paper", "x0": 0, "x1": 1})
        shapes.append({"type": "rect", **span, "y0": low, "y1": high,
                       "fillcolor": "rgba(0,158,115,0.15)", "line": {"width": 0}, "layer": "below"})
        shapes.append({"type": "line", **span, "y0": median, "y1": median,
                       "line": {"color": "#009E73", "width": 1, "dash": "dot"}, "layer": "below"})
        annotations.append({"xref": "paper", "x": 1, "y": high, "yanchor": "bottom", "xanchor": "right",
                            "text": plotly_text(baseline_label), "showarrow": False,
                            "font": {"color": "#009E73", "size": 11}})
        chosen = set(baseline_times)
        ringed = [p for p in points if p.time in chosen]
        if ringed:
            data.append({"type": "scatter", "mode": "markers", "name": "baseline sessions",
                         "x": [p.time for p in ringed], "y": [sig(p.fraction) for p in ringed],
                         "hoverinfo": "skip", "marker": {"size": 11, "symbol": "circle-open", "color": "#009E73",
                                                          "line": {"width": 1.5}}})
    for marker in markers:
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": marker.start, "x1": marker.end,
                       "y0": 0, "y1": 1, "fillcolor": "rgba(230,159,0,0.35)", "line": {"color": "#E69F00",
                                                                                    "width": 1}})
        annotations.append({"x": marker.end, "yref": "paper", "y": 1, "yanchor": "bottom",
                            "text": plotly_text(marker.label), "hovertext": plotly_text(marker.hover),
                            "showarrow": False,
                            "font": {"color": "#9a6a00", "size": 11}})
    timed = [p for p in points if p.time_s is not None]
    if timed:
        data.append({"type": "scatter", "mode": "lines+markers", "name": "time per call", "yaxis": "y2",
                     "x": [p.time for p in timed], "y": [sig(p.time_s) for p in timed],
                     "hovertemplate": "time per call %{y:.3s}s<extra></extra>",
                     "line": {"color": "#E69F00", "width": 1, "dash": "dot"},
                     "marker": {"size": 4 if len(timed) <= 150 else 2, "symbol": "square", "color": "#E69F00"}})
    return {"data": data, "layout": _layout(
        "Fraction of the roofline and time per call per session", shapes=shapes, annotations=annotations,
        margin={"l": 60, "r": 70, "t": 40, "b": 50},
        xaxis=_axis("session start (UTC)", type="date"), yaxis=_axis("fraction", rangemode="tozero"),
        yaxis2=_axis("time per call", overlaying="y", side="right", rangemode="tozero", tickformat=".3s",
                     ticksuffix="s", showgrid=False))}


@dataclass(frozen=True)
class Roofs:
    peak_flops: Mapping[str, float]
    bandwidth: Mapping[str, float]


def roof_traces(roofs: Roofs, x_range: tuple[float, float]) -> list[Trace]:
    """One diagonal per memory level up to the highest compute roof, one flat line per precision."""
    low, high = x_range
    traces: list[Trace] = []
    top = max(roofs.peak_flops.values(), default=None)
    fastest = max(roofs.bandwidth.values(), default=None)
    for i, (level, bw) in enumerate(sorted(roofs.bandwidth.items(), key=lambda kv: -kv[1])):
        end = min(high, top / bw) if top else high
        traces.append({"type": "scatter", "mode": "lines", "name": f"{plotly_text(level)} {si(bw, 'B/s')}",
                       "x": [low, end], "y": [low * bw, end * bw], "hoverinfo": "name",
                       "line": {"color": PALETTE[i % len(PALETTE)], "width": 1.5}})
    # Names whose values print the same share one line (an older record's fp16 = fp16_tensor); CUDA-core
    # roofs solid, Tensor Core roofs dashed, as on the failure charts.
    groups: dict[str, list[tuple[str, float]]] = {}
    for precision, peak in roofs.peak_flops.items():
        groups.setdefault(si(peak, "FLOP/s"), []).append((precision, peak))
    for shown, members in sorted(groups.items(), key=lambda kv: -max(p for _, p in kv[1])):
        members.sort(key=lambda m: (is_tensor(m[0]), m[0]))
        peak = max(p for _, p in members)
        tensor = any(is_tensor(name) for name, _ in members)
        start = max(low, peak / fastest) if fastest else low
        name = " / ".join(plotly_text(n) for n, _ in members) + f" {shown}"
        traces.append({"type": "scatter", "mode": "lines", "name": name,
                       "x": [start, high], "y": [peak, peak], "hoverinfo": "name",
                       "line": {"color": "#444", "width": 1.5, "dash": "dash" if tensor else "solid"}})
    return traces


def x_range(roofs: Roofs, xs: Sequence[float]) -> tuple[float, float]:
    """From well left of the slowest ridge to well right of it, widened to every point shown."""
    ridges = [p / b for p in roofs.peak_flops.values() for b in roofs.bandwidth.values() if b > 0]
    low = min([*ridges, *xs], default=1.0) / 4
    high = max([*ridges, *xs], default=1.0) * 4
    return low, high


def roofline_layout(title: str, height: int = 460, x_range: Sequence[float] | None = None,
                    y_range: Sequence[float] | None = None) -> Layout:
    """``x_range``, ``y_range``: fixed axis ranges (log10 units, as plotly takes them), for labels placed in them."""
    x_axis = _axis("arithmetic intensity (FLOP/byte)", type="log")
    y_axis = _axis("attained FLOP/s", type="log", exponentformat="SI")
    if x_range is not None:
        x_axis["range"] = list(x_range)
    if y_range is not None:
        y_axis["range"] = list(y_range)
    return _layout(title, height=height, xaxis=x_axis, yaxis=y_axis)


@dataclass(frozen=True)
class RooflinePoint:
    label: str  # hover text: date, commit, fraction; plotly text (history strings through plotly_text)
    ai: float
    flops_per_s: float


@dataclass(frozen=True)
class KernelPoint:
    """One kernel of the latest session at one memory level (the paper's three markers per kernel)."""

    label: str  # hover text; plotly text (history strings through plotly_text)
    ai: float
    flops_per_s: float
    level: str
    rank: int  # by time, 0 the longest: its colour
    tensor: bool  # most of its FLOPs on Tensor Cores: a black outline
    share: float  # of the kernels' time: its size


LEVEL_SYMBOLS = {"L1": "square", "L2": "triangle-up", "L3": "diamond", "DRAM": "circle", "HBM": "circle"}


def kernel_traces(kernels: Sequence[KernelPoint]) -> list[Trace]:
    """One trace per level (its marker shape), each kernel in its colour, a Tensor Core kernel outlined black."""
    traces: list[Trace] = []
    for level in dict.fromkeys(k.level for k in kernels):
        mine = [k for k in kernels if k.level == level]
        traces.append({
            "type": "scatter", "mode": "markers", "name": f"latest kernels at {plotly_text(level)}",
            "x": [sig(k.ai) for k in mine], "y": [sig(k.flops_per_s) for k in mine],
            "text": [k.label for k in mine], "hovertemplate": "%{text}<extra>" + plotly_text(level) + "</extra>",
            "marker": {"symbol": LEVEL_SYMBOLS.get(level, "circle"),
                       "size": [sig(8 + 22 * k.share, 3) for k in mine], "opacity": 0.75,
                       "color": [PALETTE[k.rank] if k.rank < len(PALETTE) else "#999" for k in mine],
                       "line": {"color": ["#000" if k.tensor else "#fff" for k in mine],
                                "width": [2.5 if k.tensor else 0.5 for k in mine]}}})
    return traces


def roofline_figure(roofs: Roofs, history: Sequence[RooflinePoint], latest: Mapping[str, float],
                    latest_flops_per_s: float, kernels: Sequence[KernelPoint]) -> Figure:
    """The hierarchical roofline: roofs, the test at the outer level through history (coloured by session),
    the latest session at every level, and the latest kernels."""
    xs = [p.ai for p in history] + list(latest.values()) + [k.ai for k in kernels]
    data = roof_traces(roofs, x_range(roofs, xs))
    if history:
        data.append({"type": "scatter", "mode": "markers", "name": "every session",
                     "x": [sig(p.ai) for p in history], "y": [sig(p.flops_per_s) for p in history],
                     "text": [p.label for p in history], "hovertemplate": "%{text}<extra></extra>",
                     "marker": {"size": 7, "color": list(range(len(history))), "colorscale": "Viridis",
                                "reversescale": True, "opacity": 0.8, "showscale": False}})
    if latest:
        data.append({"type": "scatter", "mode": "markers+text", "name": "latest, per level",
                     "x": [sig(v) for v in latest.values()], "y": [sig(latest_flops_per_s)] * len(latest),
                     "text": [plotly_text(level) for level in latest], "textposition": "top center",
                     "hovertemplate": "%{text}: AI %{x:.3g}, %{y:.3s}FLOP/s<extra>latest</extra>",
                     "marker": {"size": 12, "symbol": "diamond-open", "color": FAIL, "line": {"width": 2}}})
    data.extend(kernel_traces(kernels))
    return {"data": data, "layout": roofline_layout("Hierarchical roofline: this test through history")}


def roofs_over_time_figure(title: str, unit: str, times: Sequence[str], commits: Sequence[str],
                           series: Mapping[str, Sequence[float | None]]) -> Figure:
    """One line per roof (level or precision) over the sessions: the machine's characterization drift."""
    data: list[Trace] = [{"type": "scatter", "mode": "lines+markers", "name": plotly_text(name), "x": list(times),
             "y": [sig(v) for v in values], "customdata": [plotly_text(c) for c in commits],
             "hovertemplate": f"{plotly_text(name)}: %{{y:.3s}}{unit}<br>%{{x|%Y-%m-%d %H:%M}}<br>"
                              "commit %{customdata}<extra></extra>",
             "marker": {"size": 4}, "line": {"color": PALETTE[i % len(PALETTE)], "width": 1}}
            for i, (name, values) in enumerate(series.items())]
    return {"data": data, "layout": _layout(title, height=340, xaxis=_axis("session start (UTC)", type="date"),
                                            yaxis=_axis(unit, type="log", exponentformat="SI"))}


class TrajectoryLine(TypedDict, total=False):
    """One line of a trajectory chart in one session: variants that differ only in the axis parameter."""

    name: str  # plotly text, as every string of the line (history strings through plotly_text)
    x: list[float | None]  # sig(): None for a number that is not finite
    y: list[float | None]
    labels: list[str]
    text: list[str]
    positions: list[str]  # where each point's label goes, chosen once the axes' ranges are known


class TrajectorySession(TypedDict):
    """One session's trajectory chart: its name in the session menu and its lines."""

    label: str  # plotly text
    lines: list[TrajectoryLine]


def sparkline(values: Sequence[float], threshold: float | None, colour: str, width: int = 120,
              height: int = 26) -> str:
    """An inline SVG of the last values, the threshold dashed; no script needed on the index."""
    if not values:
        return ""
    scale = [*values, *([threshold] if threshold is not None else [])]
    low, high = min(scale), max(scale)
    span = (high - low) or 1.0
    step = (width - 6) / max(1, len(values) - 1)

    def y(v: float) -> float:
        return round(height - 3 - (v - low) / span * (height - 6), 1)

    points = " ".join(f"{round(3 + i * step, 1)},{y(v)}" for i, v in enumerate(values))
    parts = [(f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             f'role="img" aria-label="trend of the last {len(values)} sessions">')]
    if threshold is not None:
        parts.append(f'<line x1="0" x2="{width}" y1="{y(threshold)}" y2="{y(threshold)}" stroke="{FAIL}" '
                     'stroke-width="1" stroke-dasharray="3,2"/>')
    parts.append(f'<polyline fill="none" stroke="#555" stroke-width="1.2" points="{points}"/>')
    parts.append(f'<circle cx="{round(3 + (len(values) - 1) * step, 1)}" cy="{y(values[-1])}" r="2.5" '
                 f'fill="{colour}"/></svg>')
    return "".join(parts)


def chain_figure(nights: Sequence[Night], title: str) -> Figure:
    """A test's time night by night from its chained A/B ratios (``history.chain.Night``s), with the 95 %
    band the chain's errors grow, beside the raw times (the runner's drift included); nights whose own A/B
    verdict was regressed or improved are marked."""
    times = [n.start for n in nights]
    commits = [plotly_text(n.commit[:12]) for n in nights]
    band: Trace = {"type": "scatter", "mode": "lines", "name": "95 % interval", "x": times + times[::-1],
            "y": [sig(n.high) for n in nights] + [sig(n.low) for n in nights][::-1], "fill": "toself",
            "fillcolor": "rgba(0,114,178,0.15)", "line": {"width": 0}, "hoverinfo": "skip"}
    level: Trace = {"type": "scatter", "mode": "lines+markers", "name": "chained A/B (drift-free)", "x": times,
             "y": [sig(n.level) for n in nights], "customdata": commits, "line": {"color": POINT, "width": 2},
             "marker": {"size": 6, "color": [FAIL if n.verdict in ("regressed", "improved") else POINT
                                             for n in nights]},
             "hovertemplate": "×%{y:.3f}<br>%{x|%Y-%m-%d}<br>commit %{customdata}<extra></extra>"}
    raw: Trace = {"type": "scatter", "mode": "lines+markers", "name": "raw time (host drift included)", "x": times,
           "y": [sig(n.raw) for n in nights], "line": {"color": "#999", "width": 1, "dash": "dot"},
           "marker": {"size": 4, "color": "#999"}, "hovertemplate": "raw ×%{y:.3f}<extra></extra>"}
    return {"data": [band, level, raw],
            "layout": _layout(title, height=340, xaxis=_axis("night (UTC)", type="date"),
                              yaxis=_axis("time / first night's", type="log"))}
