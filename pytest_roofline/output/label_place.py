"""Greedy placement of chart labels so that no two overlap (matplotlib, imported only when a chart is drawn).

Each label comes with candidate positions in order of preference (a roof's label: the right end of its line,
above it, then below it, then further left). Labels are placed one by one, most important first: each takes
its first candidate whose box, measured with the renderer's own text extents, overlaps no label placed
before it, no obstacle (the legend) and stays inside the axes. Lines are soft obstacles: a candidate that
crosses none is preferred, one that crosses a line is taken before one that covers another label. When every
candidate collides, the one with the least overlap is kept (a dense chart is still drawn, never refused).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypedDict, TypeVar, runtime_checkable

if TYPE_CHECKING:  # matplotlib is imported only when a chart is drawn
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.backend_bases import RendererBase
    from matplotlib.figure import Figure, SubFigure
    from matplotlib.text import Annotation, Text

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in display pixels
T = TypeVar("T")
GRAZE = 0.08  # a label may overlap lines by this share of its own area (an edge touching a line)


@dataclass(frozen=True)
class Candidate:
    """A position in data coordinates, the text's alignment there and an offset in points (off the line)."""

    x: float
    y: float
    ha: str = "right"
    va: str = "bottom"
    dx: float = 0.0
    dy: float = 0.0


class TextStyle(TypedDict, total=False):
    """A label's text properties, passed to ``annotate``."""

    fontsize: float
    color: str


@dataclass
class Label:
    text: str
    candidates: Sequence[Candidate]
    style: TextStyle = field(default_factory=TextStyle)


@runtime_checkable
class _PixelCanvas(Protocol):
    """A canvas that renders to pixels (Agg's and its subclasses'): its renderer measures text extents."""

    def get_renderer(self) -> RendererBase: ...


def renderer_of(figure: Figure | SubFigure) -> RendererBase:
    """The renderer of ``figure``'s canvas; AttributeError for a canvas without one (a vector backend's)."""
    canvas = figure.canvas
    if isinstance(canvas, _PixelCanvas):
        return canvas.get_renderer()
    raise AttributeError(f"{type(canvas).__name__!r} object has no attribute 'get_renderer'")  # as the call did


def box_of(artist: Artist, renderer: RendererBase, pad: float = 1.5) -> Box:
    extent = artist.get_window_extent(renderer=renderer)
    return extent.x0 - pad, extent.y0 - pad, extent.x1 + pad, extent.y1 + pad


def overlap(a: Box, b: Box) -> float:
    """Area two boxes share (0 when apart)."""
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    return width * height if width > 0 and height > 0 else 0.0


def _outside(box: Box, frame: Box) -> float:
    """Area of ``box`` that lies outside ``frame``."""
    area = (box[2] - box[0]) * (box[3] - box[1])
    return area - overlap(box, frame)


def least_costly(candidates: Iterable[T], cost: Callable[[T], tuple[float, ...]],
                 discard: Callable[[T], None] = lambda _: None,
                 free: Callable[[tuple[float, ...]], bool] = lambda price: not any(price)) -> T | None:
    """The greedy step every label placer takes (this module's for matplotlib, ``site.label_layout``'s for
    plotly): the first candidate whose cost is ``free``, else the least costly of them all (a dense chart is
    still drawn); every other candidate tried is handed to ``discard``. Candidates are made lazily, in order of
    preference, so a free first position costs one try."""
    best: tuple[tuple[float, ...], T] | None = None
    for candidate in candidates:
        price = cost(candidate)
        if best is None or price < best[0]:
            if best is not None:
                discard(best[1])
            best = (price, candidate)
        else:
            discard(candidate)
        if free(price):
            break
    return None if best is None else best[1]


def place_labels(ax: Axes, labels: Sequence[Label], obstacles: Sequence[Box] = (),
                 lines: Sequence[Box] = ()) -> list[Annotation]:
    """Annotate ``ax`` with every label at a free candidate; return the text artists in the order given.

    Call it after the axes' limits and the figure's layout are final: boxes are measured in pixels."""
    renderer = renderer_of(ax.figure)
    frame = ax.get_window_extent(renderer=renderer)
    inside: Box = (frame.x0, frame.y0, frame.x1, frame.y1)
    placed: list[Box] = []
    artists: list[Annotation] = []

    def drawn(label: Label) -> Iterator[tuple[Annotation, Box, Box]]:
        for candidate in label.candidates:
            text = ax.annotate(label.text, (candidate.x, candidate.y), xytext=(candidate.dx, candidate.dy),
                               textcoords="offset points", ha=candidate.ha, va=candidate.va,
                               annotation_clip=False, **label.style)
            yield text, box_of(text, renderer), box_of(text, renderer, pad=0.0)

    def cost(tried: tuple[Annotation, Box, Box]) -> tuple[float, float, float]:
        _, box, tight = tried
        # hard cost first (labels, obstacles, leaving the axes), then the lines it crosses
        hard = (sum(overlap(box, other) for other in placed) + sum(overlap(box, o) for o in obstacles)
                + _outside(tight, inside))
        crossed = sum(overlap(tight, line) for line in lines)
        # grazing a line with an edge of the text keeps it readable and unambiguous: not a cost
        soft = crossed if crossed > GRAZE * (tight[2] - tight[0]) * (tight[3] - tight[1]) else 0.0
        return hard, soft, crossed

    for label in labels:
        best = least_costly(drawn(label), cost, lambda tried: tried[0].remove(),
                            free=lambda price: price[0] == 0 and price[1] == 0)  # grazing lines is free
        if best is not None:
            placed.append(best[1])
            artists.append(best[0])
    return artists


def line_boxes(ax: Axes, xs: Iterable[float], ys: Iterable[float], step_px: float = 8.0) -> list[Box]:
    """Small pixel boxes that cover a drawn line (data coordinates), for labels to keep off it: one per
    ``step_px`` along each segment, so a diagonal is covered by its own path, not by its bounding box."""
    points = ax.transData.transform(list(zip(xs, ys)))
    boxes: list[Box] = []
    half = 1.0
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if not all(math.isfinite(v) for v in (x0, y0, x1, y1)):  # NaN: a gap in the line
            continue
        pieces = max(1, int(math.hypot(x1 - x0, y1 - y0) // step_px))
        for i in range(pieces):
            ax0, ay0 = x0 + (x1 - x0) * i / pieces, y0 + (y1 - y0) * i / pieces
            ax1, ay1 = x0 + (x1 - x0) * (i + 1) / pieces, y0 + (y1 - y0) * (i + 1) / pieces
            boxes.append((min(ax0, ax1) - half, min(ay0, ay1) - half, max(ax0, ax1) + half, max(ay0, ay1) + half))
    return boxes


def overlapping_pairs(texts: Sequence[Text]) -> list[tuple[str, str]]:
    """The labels whose boxes overlap (for tests and checks): pairs of their texts."""
    if not texts:
        return []
    renderer = renderer_of(texts[0].figure)
    boxes = [(t.get_text(), box_of(t, renderer, pad=0.0)) for t in texts]
    return [(a[0], b[0]) for i, a in enumerate(boxes) for b in boxes[i + 1:] if overlap(a[1], b[1]) > 0]
