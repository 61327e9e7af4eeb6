"""Where each point label of a plotly chart goes (``textposition``), chosen so that labels stay apart.

Plotly draws a point's text at one of nine positions around it and never moves it to avoid another; the
trajectory charts label every point (its batch size), so neighbouring points and variants' lines overlap. Here
each label takes, in order, the first position whose estimated box covers no label placed before it and no
marker (``output.label_place.least_costly``, the greedy step the matplotlib charts take too), on axes whose
ranges the figure fixes (so data map to pixels as estimated). The text size is an estimate from the font size
(a browser's exact extents are not known when the page is written).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_roofline.output.label_place import Box, least_costly, overlap

POSITIONS = ("top left", "top right", "bottom right", "bottom left", "top center", "bottom center",
             "middle right", "middle left")
CHAR_PX = 7.0  # average width of a character at the charts' 12 px font
LINE_PX = 15.0
MARKER_PX = 6.0  # a marker's radius plus a gap


def log_range(values: Sequence[float], below: float = 2.0, above: float = 2.0) -> list[float]:
    """A log axis range (log10 units, as plotly takes it) holding every positive value with a margin."""
    positive = [v for v in values if v > 0]
    if not positive:
        return [0.0, 1.0]
    return [math.log10(min(positive) / below), math.log10(max(positive) * above)]


def _box(x: float, y: float, width: float, position: str) -> Box:
    vertical, _, horizontal = position.partition(" ")
    if vertical == "top":
        y0, y1 = y + MARKER_PX, y + MARKER_PX + LINE_PX
    elif vertical == "bottom":
        y0, y1 = y - MARKER_PX - LINE_PX, y - MARKER_PX
    else:
        y0, y1 = y - LINE_PX / 2, y + LINE_PX / 2
    if horizontal == "left":
        x0, x1 = x - MARKER_PX - width, x - MARKER_PX / 2
    elif horizontal == "right":
        x0, x1 = x + MARKER_PX / 2, x + MARKER_PX + width
    else:
        x0, x1 = x - width / 2, x + width / 2
    return x0, y0, x1, y1


def text_positions(points: Sequence[tuple[float, float, str]], x_range: Sequence[float],
                   y_range: Sequence[float], size: tuple[float, float] = (1000.0, 400.0)) -> list[str]:
    """One ``textposition`` per point (x, y in data units on log axes, its label), in the order given."""
    width, height = size

    def pixel(x: float, y: float) -> tuple[float, float]:
        px = (math.log10(x) - x_range[0]) / ((x_range[1] - x_range[0]) or 1.0) * width
        py = (math.log10(y) - y_range[0]) / ((y_range[1] - y_range[0]) or 1.0) * height
        return px, py

    pixels = [pixel(x, y) if x > 0 and y > 0 else (math.nan, math.nan) for x, y, _ in points]
    markers: list[Box] = [(px - 4, py - 4, px + 4, py + 4) for px, py in pixels if math.isfinite(px)]
    frame: Box = (0.0, 0.0, width, height)
    placed: list[Box] = []
    chosen = []
    for (px, py), (_, _, text) in zip(pixels, points):
        if not math.isfinite(px):  # a point not drawn
            chosen.append(POSITIONS[0])
            continue

        def cost(position: str, px: float = px, py: float = py, text: str = text) -> tuple[float]:
            box = _box(px, py, CHAR_PX * len(text), position)
            area = (box[2] - box[0]) * (box[3] - box[1])
            return (sum(overlap(box, other) for other in placed) + sum(overlap(box, m) for m in markers)
                    + area - overlap(box, frame),)

        best = least_costly(POSITIONS, cost) or POSITIONS[0]
        placed.append(_box(px, py, CHAR_PX * len(text), best))
        chosen.append(best)
    return chosen
