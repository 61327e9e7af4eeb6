"""HTML for the site's pages: one shell, tables and chart slots; figures travel as JSON in the page."""

from __future__ import annotations

import contextvars
import html
import json
from collections.abc import Iterable, Sequence

from .charts import FAIL, Figure
from .model import TestSummary, params_label
from .verdicts import MIN_CHANGE

VERDICT_COLOURS = {"regressed": FAIL, "changed": "#CC79A7", "noisy": "#56B4E9", "improved": "#009E73",
                   "steady": "#555", "inconclusive": "#999", "new": "#E69F00"}


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def wrappable(value: object) -> str:
    """Escaped text with a line-break opportunity (``<wbr>``) after each ``::``, ``/`` and ``[``: a long node id
    wraps between its parts, never inside a word (the stylesheet breaks a word only when a part alone is wider
    than the column)."""
    text = esc(value)
    for mark in ("::", "/", "["):
        text = text.replace(mark, mark + "<wbr>")
    return text


# Characters a JSON text keeps as they are but an HTML parser or a JavaScript source reads: escaped, no value
# can close the script element, open a comment or end a line (outside JSON they occur in no JSON text).
_SCRIPT_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                                 "\u2029": "\\u2029"})


def json_text(value: object) -> str:
    """``value`` as JSON that is safe inside an inline ``<script>``: ``<``, ``>``, ``&``, U+2028 and U+2029
    written as ``\\u`` escapes (JSON.parse reads them back as the characters)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False).translate(_SCRIPT_ESCAPES)


def json_script(element_id: str, value: object) -> str:
    """Data for the page's script, as :func:`json_text`."""
    return f'<script type="application/json" id="{esc(element_id)}">{json_text(value)}</script>'


def chart(element_id: str, figure: Figure, height: int | None = None) -> str:
    style = f' style="height:{height}px"' if height else ""
    return f'<div class="chart" id="{esc(element_id)}" data-figure="{esc(element_id)}-data"{style}></div>' + \
        json_script(f"{element_id}-data", figure)


PLOTLY_JS = "plotly.min.js"  # the one copy a site holds, at its top folder
# Where the pages of the site being written load plotly.js from: the site's own copy, or a URL / path given
# with ``report --plotly-js`` (set by build_site for the pages it writes).
PLOTLY: contextvars.ContextVar[str] = contextvars.ContextVar("plotly", default=PLOTLY_JS)


def plotly_src(root: str) -> str:
    """The ``src`` of the plotly script on a page ``root`` below the site's top folder."""
    where = PLOTLY.get()
    return where if "://" in where or where.startswith("/") else root + where


def page(title: str, root: str, body: str, nav: Sequence[tuple[str, str]] = ()) -> str:
    """A whole page; ``root`` is the relative path back to the site's top folder ("" or "../../"). Every page
    loads the one plotly.js of the site (:func:`plotly_src`), never a copy of its own."""
    links = "".join(f'<a href="{esc(href)}">{esc(text)}</a>' for href, text in nav)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)} · roofline history</title>
<link rel="stylesheet" href="{root}site.css">
<script src="{esc(plotly_src(root))}"></script>
<script src="{root}site.js"></script>
</head>
<body>
<header><a class="brand" href="{root}index.html">pytest-roofline history</a><nav>{links}</nav></header>
{body}
</body>
</html>
"""


def percent(change: float | None) -> str:
    """A change in percent, coloured only from the verdict's minimum change on (smaller ones are noise)."""
    if change is None:
        return '<span class="muted">—</span>'
    css = "down" if change <= -MIN_CHANGE else "up" if change >= MIN_CHANGE else "muted"
    return f'<span class="{css}">{change:+.1%}</span>'


def fraction_text(value: float | None, threshold: float | None = None) -> str:
    if value is None:
        return '<span class="muted">—</span>'
    below = threshold is not None and value < threshold
    return f'<span class="{"below" if below else ""}" title="{value:.4g}">{value:.3f}</span>'


def verdict_badge(summary: TestSummary) -> str:
    """The gate's verdict, its explanation on hover; without a gate record, the trend's, labelled so."""
    if summary.gate is not None:
        return (f'<span class="verdict {esc(summary.gate.verdict)}" title="{esc(summary.gate.explanation)}">'
                f"{esc(summary.gate.verdict)}</span>")
    comparison = summary.comparison
    return (f'<span class="verdict {esc(comparison.verdict)}" title="trend: {esc(comparison.describe())}">'
            f'{esc(comparison.verdict)}</span> <span class="muted">trend</span>')


def why(summary: TestSummary) -> str:
    """The gate's explanation under its verdict on the index, for every test it did not find steady."""
    gate = summary.gate
    if gate is None or gate.verdict == "steady":
        return ""
    return f'<div class="why">{esc(gate.explanation)}</div>'


def index_table(rows: Iterable[tuple[TestSummary, str, str, str | None]]) -> str:
    """Rows of (summary, test page link, sparkline SVG, trajectory link or None)."""
    body = []
    for summary, href, spark, trajectory in rows:
        traj = f'<a href="{esc(trajectory)}" title="roofline trajectory of the variants">trajectory</a>' \
            if trajectory else ""
        body.append(
            f'<tr data-test="{esc(summary.nodeid)}" data-bound="{esc(summary.bound or "")}" '
            f'data-verdict="{esc(summary.verdict)}">'
            f'<td class="test"><a href="{esc(href)}">{test_name(summary.nodeid)}</a></td>'
            f'<td class="num">{fraction_text(summary.latest, summary.threshold)}</td>'
            f'<td class="num">{fraction_text(summary.threshold)}</td>'
            f'<td>{esc(summary.bound or "—")}</td><td>{spark}</td>'
            f'<td class="num">{percent(summary.week_change)}</td>'
            f'<td class="num">{percent(summary.baseline_change)}</td>'
            f'<td>{verdict_badge(summary)}{why(summary)}</td><td>{traj}</td></tr>')
    return ('<div class="scroll"><table class="tests"><thead><tr><th>test</th><th class="num">fraction</th>'
            '<th class="num">threshold</th><th>bound</th><th>trend</th><th class="num">last week</th>'
            '<th class="num">since baseline</th><th>verdict</th><th></th></tr></thead><tbody>'
            + "".join(body) + "</tbody></table></div>")


def test_name(nodeid: str) -> str:
    """The file part of a node id small and grey, the test itself in full: rows stay one line."""
    path, sep, name = nodeid.rpartition("::")
    return f'<span class="path">{wrappable(path + sep)}</span>{wrappable(name)}' if sep else wrappable(nodeid)


def filters(bounds: Sequence[str]) -> str:
    bound_options = "".join(f'<option value="{esc(b)}">{esc(b)}</option>' for b in bounds)
    verdicts = "".join(f'<option value="{v}">{v}</option>' for v in VERDICT_COLOURS)
    return ('<div class="filters"><input name="name" type="search" placeholder="filter by test name" '
            'aria-label="filter by test name">'
            f'<select name="bound" aria-label="bound"><option value="">every bound</option>{bound_options}</select>'
            f'<select name="verdict" aria-label="verdict"><option value="">every verdict</option>{verdicts}</select>'
            '<span class="count muted"></span></div>')


def facts(items: Sequence[tuple[str, str]]) -> str:
    return '<div class="facts">' + "".join(f"<div><span>{esc(k)}</span><b>{v}</b></div>" for k, v in items) + \
        "</div>"


def table(head: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    """A table of already escaped cells; columns in ``numeric`` are right-aligned."""
    def cell(tag: str, i: int, text: str) -> str:
        return f'<{tag} class="num">{text}</{tag}>' if i in numeric else f"<{tag}>{text}</{tag}>"
    header = "".join(cell("th", i, esc(h)) for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"


def variant_name(summary: TestSummary) -> str:
    return params_label(summary.params) or summary.nodeid
