"""The summary table read in one glance: one line per test within the terminal's width, short markers
explained once below it, and a one-line legend. Plain Python, no pytest."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_roofline.model.units import time_text
from pytest_roofline.output.text import fraction_digits

HEADERS = ("test", "fraction", "min", "bound", "time/call", "GFLOP/s", "GB/s", "verdict")
RIGHT = (1, 2, 4, 5, 6)  # numeric columns
MIN_ID = 32  # never shorten a node id below this (a narrow terminal wraps instead): it must stay readable
LEGEND = "fraction = time at the roof / time measured; bound = the roof that limits it"

# marker -> what it means, said once under the table for the markers the table shows
MARKERS = {
    "c": "contended: no free core, measured again at the end of the session",
    "f": "page faults: its timed calls page-faulted; first touch of fresh memory is in their time",
    "u": "uncounted ops: FLOP-bearing ops without a counting rule ran; the fraction misses their FLOPs",
    "!": ("above 1: the call beat the roof it was judged on, so that roof is below the machine's (re-measure it: "
          "--roofline-recharacterize), or part of its data sat in a nearer level; its notes in results.json"),
    "g": "GPU shared: other processes ran on its GPU",
}


@dataclass(frozen=True)
class Row:
    nodeid: str
    fraction: float | None
    min_fraction: float | None
    bound: str
    time_s: float | None
    gflops: float | None
    gbytes: float | None
    verdict: str
    marks: str = ""  # marker letters, e.g. "cf"


def fraction_text(value: float | None) -> str:
    """Three decimals, or two significant digits below 0.01 (``9.6e-05``, never ``0.000``); ``-`` for none."""
    return "-" if value is None else fraction_digits(value)


def shorten_id(nodeid: str, size: int) -> str:
    """A node id within ``size`` characters, shortened from the middle: the file name and the parameters
    (``[...]``) stay, the directories go first, then the middle of the test's name."""
    if len(nodeid) <= size:
        return nodeid
    path, sep, rest = nodeid.partition("::")
    _folders, slash, name = path.rpartition("/")
    if slash:
        candidate = f".../{name}{sep}{rest}"
        if len(candidate) <= size:
            return candidate
        path = f".../{name}"
    base, bracket, params = rest.partition("[")
    params = bracket + params
    if len(params) > size // 2:  # a long parameter id keeps its ends
        keep = max(size // 2 - 3, 4)
        params = params[:keep // 2 + 1] + "..." + params[-(keep - keep // 2):]
    room = size - len(path) - len(sep) - len(params)
    if room >= 8:
        head = (room - 3) // 2
        base = base if len(base) <= room else base[:head] + "..." + base[-(room - 3 - head):]
        return f"{path}{sep}{base}{params}"
    tail = f"{sep}{base}{params}"
    if size - len(tail) >= 16:  # a long file name: its middle goes before the test's name does
        keep = size - len(tail) - 3
        return path[:keep // 2] + "..." + path[len(path) - (keep - keep // 2):] + tail
    if len(path) + len(sep) + 3 + len(params) <= size:  # the name goes before the file or its parameters
        return f"{path}{sep}...{params}"
    # not even the file fits beside the parameters: the end (the test's name and parameters) says most
    return "..." + f"{path}{sep}{base}{params}"[-(size - 3):]


def whole_name_id(nodeid: str, size: int) -> str | None:
    """The node id within ``size`` characters with the test's own name (after ``::``) and its parameters
    whole: the folders go first, then the middle of the file name (at least 12 characters of it stay). None
    when it does not fit even so: the table then gives the id a line of its own (:func:`render`), since two
    tests cut to the same text cannot be told apart."""
    if len(nodeid) <= size:
        return nodeid
    path, sep, rest = nodeid.partition("::")
    if not sep:
        return None
    _folders, slash, name = path.rpartition("/")
    prefix = ".../" if slash else ""
    if len(prefix) + len(name) + len(sep) + len(rest) <= size:
        return f"{prefix}{name}{sep}{rest}"
    keep = size - len(prefix) - len(sep) - len(rest) - 3
    if keep >= 12:
        return f"{prefix}{name[:keep // 2]}...{name[len(name) - (keep - keep // 2):]}{sep}{rest}"
    return None


def cli_width() -> int:
    """The width a command's table fits: ``COLUMNS`` when set, the terminal's on a terminal, else 0 (a pipe or a
    file: no limit, lines stay whole for tools that read them)."""
    import os
    import shutil
    import sys

    text = os.environ.get("COLUMNS", "")
    if text.isdigit() and int(text) > 0:
        return int(text)
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else 0


def render(rows: Sequence[Row], width: int = 0) -> list[str]:
    """The header and one line per row; with ``width``, node ids are shortened so each line fits, never
    inside the test's own name: an id that cannot fit so goes on a line of its own (its folders dropped), its
    figures on the next."""

    def num(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    cells = [(r.nodeid, fraction_text(r.fraction), num(r.min_fraction, "g"), r.bound, time_text(r.time_s),
              num(r.gflops, ".4g"), num(r.gbytes, ".4g"), r.verdict + (f" [{r.marks}]" if r.marks else ""))
             for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(HEADERS)]
    if width:
        fixed = sum(widths[1:]) + 2 * (len(HEADERS) - 1)
        widths[0] = min(widths[0], max(MIN_ID, width - fixed))

    def line(values: Sequence[str], header: bool = False) -> list[str]:
        fitted = values[0] if header else whole_name_id(values[0], widths[0])
        rest = [v.rjust(w) if i in RIGHT else v.ljust(w)
                for i, (v, w) in enumerate(zip(values[1:], widths[1:]), start=1)]
        if fitted is None:
            path, sep, name = values[0].partition("::")
            alone = f".../{path.rpartition('/')[2]}{sep}{name}" if "/" in path else values[0]
            return [alone, "  ".join([" " * widths[0], *rest]).rstrip()]
        return ["  ".join([fitted.ljust(widths[0]), *rest]).rstrip()]

    return [*line(HEADERS, header=True), *(text for c in cells for text in line(c))]


def marker_lines(rows: Sequence[Row], details: dict[str, list[str]]) -> list[str]:
    """One line per marker the table shows: ``[c] contended: ...``, with the details gathered per marker."""
    shown = sorted({m for r in rows for m in r.marks}, key=list(MARKERS).index)
    out = []
    for mark in shown:
        extra = sorted(set(details.get(mark, [])))
        more = f" ({'; '.join(extra[:3])}{'; ...' if len(extra) > 3 else ''})" if extra else ""
        head, colon, tail = MARKERS[mark].partition(": ")
        out.append(f"[{mark}] {head}{more}{colon}{tail}")
    return out
