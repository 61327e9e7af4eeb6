"""Write the static site for a history directory: index, one page per test, trajectories, machine pages.

Layout of ``out``::

    index.html                          every machine's tests, worst first, with filters
    plotly.min.js, site.css, site.js    bundled next to the pages: nothing is loaded from the network; the one
                                        copy of plotly.js that every page loads (none with --plotly-js)
    m/<machine>/machine.html            every roof over time
    m/<machine>/t/<test>.html           a test's fraction over time and its roofline through history
    m/<machine>/traj/<function>.html    a parametrized test's variants joined on one roofline per session
    artifacts/<session>/...             copies of failing sessions' charts and kernel tables still on disk
"""

from __future__ import annotations

import functools
import math
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from pytest_roofline.errors import SiteError
from pytest_roofline.history.chain import trajectory as chain_trajectory
from pytest_roofline.model import KernelSample, Machine
from pytest_roofline.output.artifacts import kernel_rows
from pytest_roofline.output.kernel_view import by_time, is_tensor_kernel, kernel_seconds, shares
from pytest_roofline.record.sessions import Session
from pytest_roofline.record.tests import TestRecord

from . import charts, label_layout, pages
from .changepoints import change_points
from .history_reader import Skipped, load_history
from .model import (
    TestSummary,
    history_frame,
    number,
    page_names,
    parametrized,
    params_key,
    params_label,
    slug,
    summarize,
)
from .out_folder import check_out, copy_assets, staged
from .out_folder import write as _write  # build's own name: what writes the pages

SPARK_SESSIONS = 60
FAILING_LISTED = 20
SKIPPED_LISTED = 100  # skipped files the index names one by one; the rest are counted
# What a page's arithmetic raises on numbers the reader let through (a chain of many extreme A/B ratios): the
# page says it was not drawn and why, and the rest of the site is written.
NOT_DRAWN = (ArithmeticError, ValueError)


@dataclass(frozen=True)
class BuildResult:
    out: Path
    sessions: int
    tests: int
    pages: int
    size_bytes: int
    seconds: float


def _time(session_start: datetime) -> str:
    # plotly reads "YYYY-mm-dd HH:MM:SS" as a date; offsets it does not, so everything is UTC.
    return session_start.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _roofs(machine: Mapping[str, object]) -> charts.Roofs:
    def positive(values: object) -> dict[str, float]:
        if not isinstance(values, Mapping):  # absent (record.loader let only objects through)
            return {}
        return {str(k): float(v) for k, v in values.items() if isinstance(v, (int, float)) and v > 0}
    return charts.Roofs(positive(machine.get("peak_flops")), positive(machine.get("bandwidth")))


def _ai(record: TestRecord, level: str | None) -> float | None:
    value = (record.ai or {}).get(level) if level else None
    return value if value is not None and value > 0 else None


def _slowest(levels: Iterable[str], bandwidth: Mapping[str, float]) -> str | None:
    """Of the levels a record has bytes at, the slowest one: the outermost traffic (DRAM when counted).
    The analytic counter places a call's bytes at the one level its working set fits in (L2 for a small
    matmul, L3 or DRAM for a big one), so each point sits at its own level."""
    known = [lv for lv in levels if lv in bandwidth]
    return min(known, key=lambda lv: bandwidth[lv]) if known else None


def _placed_ai(record: TestRecord, bandwidth: Mapping[str, float]) -> tuple[str, float] | None:
    level = _slowest([lv for lv, v in (record.ai or {}).items() if v > 0], bandwidth)
    ai = _ai(record, level)
    return (level, ai) if level is not None and ai is not None else None


def _flops_per_s(record: TestRecord) -> float | None:
    t, flops = record.time_s, record.flops or 0.0
    return flops / t if t is not None and t > 0 and flops > 0 else None


class _Artifacts:
    """Copies artifacts that still exist into the site; a path is tried as given, then under the folders a
    session's relative paths start from (the history at ``<root>/.roofline/history`` points at ``<root>``).

    A record's paths are untrusted (a history is merged from many jobs, forks included): a file is copied only
    when it resolves, symlinks followed, inside the history or the ``sessions`` folder beside it (where the
    roofline dir keeps a session's charts), and is a regular file of an artifact's kind."""

    SUFFIXES = (".png", ".csv", ".ncu-rep", ".json")
    OUTSIDE = "not copied: outside the history"
    NOT_ARTIFACT = "not copied: not a regular .png, .csv, .ncu-rep or .json file"

    def __init__(self, history: Path, out: Path) -> None:
        self.roots = [history.parent.parent, history.parent, history, Path.cwd()]
        self.allowed = [history.resolve(), (history.parent / "sessions").resolve()]
        self.out = out

    def _inside(self, path: Path) -> bool:
        return any(path.is_relative_to(root) for root in self.allowed)

    def link(self, session_id: str, path: str) -> tuple[str | None, str]:
        """The site-relative link of the copy, or None and why it is not there."""
        source = Path(path)
        candidates = [source] if source.is_absolute() else [root / source for root in self.roots]
        existing = [c.resolve() for c in candidates if c.exists()]
        if not existing:
            return None, "not kept"
        found = next((c for c in existing if self._inside(c)), None)
        if found is None:
            return None, self.OUTSIDE
        if not found.is_file() or not found.name.endswith(self.SUFFIXES):  # is_file: stat, not a FIFO or device
            return None, self.NOT_ARTIFACT
        relative = Path("artifacts") / slug(session_id) / found.name
        target = self.out / relative
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(found, target)
        return relative.as_posix(), ""


def _test_page(summary: TestSummary, rows: pd.DataFrame, latest: Session, artifacts: _Artifacts,
               trajectory: str | None, nights: Sequence[Session] = ()) -> str:
    root = "../../../"
    measured = rows.dropna(subset=["fraction"])
    points = [charts.FractionPoint(_time(r.start), r.commit, float(r.fraction),
                                   number(r.min_fraction), number(r.time_s),
                                   r.bound if isinstance(r.bound, str) else None, r.outcome, _gate_verdict(r.record))
              for r in measured.itertuples()]
    found = change_points(summary.fractions)
    markers, change_rows = [], []
    for cp in found:
        before, after = measured.iloc[cp.index - 1], measured.iloc[cp.index]
        commits = f"{before.commit}..{after.commit}"
        markers.append(charts.Marker(points[cp.index - 1].time, points[cp.index].time, f"{cp.change:+.0%}",
                                     f"{commits}: median {cp.before:.3f} → {cp.after:.3f}"))
        change_rows.append([pages.esc(commits), pages.esc(f"{_time(before.start)[:16]} → {_time(after.start)[:16]}"),
                            f"{cp.before:.3f}", f"{cp.after:.3f}", pages.percent(cp.change)])
    body = [f"<h1>{pages.wrappable(summary.nodeid)}</h1>",
            f'<p class="muted">on <a href="../machine.html">{pages.esc(summary.machine)}</a>'
            f' · {len(rows)} sessions, {len(measured)} measured'
            + (f' · <a href="{pages.esc(trajectory)}">roofline trajectory of its variants</a>' if trajectory else "")
            + "</p>",
            pages.facts([("latest fraction", pages.fraction_text(summary.latest, summary.threshold)),
                         ("threshold", pages.fraction_text(summary.threshold)),
                         ("bound", pages.esc(summary.bound or "—")),
                         ("last week", pages.percent(summary.week_change)),
                         ("since baseline", pages.percent(summary.baseline_change)),
                         ("verdict", pages.verdict_badge(summary))]),
            _verdict_note(summary)]
    if points:
        chosen = set(summary.baseline_sessions)
        times = [_time(r.start) for r in measured.itertuples() if str(r.session_id) in chosen]
        label = (f"baseline: the {len(times)} sessions the gate used" if summary.baseline_gate else
                 f"baseline: the first {len(times)} sessions")
        body.append(pages.chart("fraction", charts.fraction_figure(points, summary.baseline, markers, times, label)))
    body.append("<h2>Change points</h2>")
    body.append(pages.table(["commits", "sessions", "median before", "median after", "change"], change_rows,
                            numeric=(2, 3, 4)) if change_rows else
                '<p class="muted">None found (ruptures PELT on log fraction; see docs/site.md).</p>')
    body.append(_chain_section(summary.nodeid, nights))
    body.append(_roofline_section(rows, latest))
    body.append(_failing_section(rows, artifacts, root))
    return pages.page(summary.nodeid, root, "\n".join(body), [(f"{root}index.html", "index"),
                                                               ("../machine.html", "machine")])


def _chain_section(nodeid: str, nights: Sequence[Session]) -> str:
    """The nightly A/B chain (history/chain.py), where the test has A/B nights: empty otherwise."""
    try:
        path = chain_trajectory(nights, nodeid)
    except NOT_DRAWN as exc:  # chained ratios past what a float holds
        return f'<h2>Nightly A/B chain</h2><p class="muted">Not drawn: {pages.esc(_why(exc))}.</p>'
    if len(path.nights) < 2:
        return ""
    last = path.nights[-1]
    loops = "" if path.misclosure is None else f"; loops' misclosure {path.misclosure:.2f} (≈1: consistent)"
    return ("<h2>Nightly A/B chain</h2>" + pages.chart("chain", charts.chain_figure(path.nights, "time, chained"))
            + f'<p class="muted">{len(path.nights)} nights, {path.edges} A/B comparisons; last night ×{last.level:.3f} '
            f"[{last.low:.3f}, {last.high:.3f}] of the first{pages.esc(loops)} (python -m pytest_roofline history "
            "chain; docs/history.md).</p>")


def _gate_verdict(record: TestRecord) -> str | None:
    return record.baseline.verdict if record.baseline is not None else None


def _verdict_note(summary: TestSummary) -> str:
    """Where the verdict comes from: the baseline gate of the latest session (its one statistic), else the trend."""
    count = len(summary.baseline_sessions)
    band = (f"Baseline band: the {count} baseline sessions the gate compared this test with in session "
            f"{pages.esc(summary.baseline_gate)} (median and range, green band; those sessions ringed)."
            if summary.baseline_gate else
            "Baseline band: the first 5 sessions shown (no session ran the baseline gate; median and range, green "
            "band; those sessions ringed).")
    gate = summary.gate
    if gate is None:
        return (f'<p class="note">Verdict: the trend (this test\'s latest session ran no baseline gate): '
                f"{pages.esc(summary.comparison.describe())}, last 5 sessions against the 5 before. {band}</p>")
    statistic = (f" Statistic: {pages.esc(gate.statistic.rstrip('.'))}."
                 if gate.statistic and gate.statistic != gate.explanation else "")
    return (f'<p class="note">Verdict of the baseline gate in this test\'s latest session '
            f"({pages.esc(gate.session_id)}, commit <code>{pages.esc(gate.commit)}</code>): "
            f"<b>{pages.esc(gate.verdict)}</b>: {pages.esc(gate.explanation.rstrip('.'))}.{statistic} {band}</p>")


def _roofline_section(rows: pd.DataFrame, latest: Session) -> str:
    # The roofs its latest fraction was judged against (those of the cores it ran on), where the record has
    # them; else the machine's.
    judged = rows.iloc[-1]["record"].judged_roofs
    roofs = _roofs(judged if judged is not None and judged.get("peak_flops") else latest.machine)
    history: list[charts.RooflinePoint] = []
    for r in rows.itertuples():
        placed, perf = _placed_ai(r.record, roofs.bandwidth), _flops_per_s(r.record)
        if placed and perf:
            fraction = f"{r.fraction:.3f}" if number(r.fraction) is not None else "—"
            history.append(charts.RooflinePoint(
                f"{_time(r.start)[:16]} {charts.plotly_text(r.commit)}<br>fraction {fraction}, AI at "
                f"{charts.plotly_text(placed[0])}", placed[1], perf))
    record = rows.iloc[-1]["record"]
    perf = _flops_per_s(record)
    if not history or perf is None or not roofs.peak_flops:
        return ('<h2>Roofline</h2><p class="muted">No roofline point: the test moves no FLOPs (it is judged '
                'against bandwidth alone) or was not measured.</p>')
    latest_ai = {lv: v for lv in roofs.bandwidth if (v := _ai(record, lv))}
    kernels, table = _kernel_view(record, roofs)
    figure = charts.roofline_figure(roofs, history, latest_ai, perf, kernels)
    return ("<h2>Roofline</h2>" + pages.chart("roofline", figure) +
            '<p class="note">Roofs the latest session judged this test against. Filled circles: this test in every '
            'session, at the slowest memory level its bytes were counted at (yellow is oldest, dark is newest); '
            'open diamonds: the latest session at every level it has bytes at; its kernels at every level (square '
            'L1, triangle L2, circle DRAM/HBM), one colour per kernel, sized by time, outlined black on Tensor '
            'Cores (an untimed kernel sits on its roof).</p>' + table)


def _kernel_view(record: TestRecord, roofs: charts.Roofs) -> tuple[list[charts.KernelPoint], str]:
    """The latest session's kernels, the paper's way: each at every level it moved bytes at, and a table of
    the longest with their share of the time, Tensor Core use, work, fraction and bound."""
    machine = Machine(name="judged", peak_flops=dict(roofs.peak_flops), bandwidth=dict(roofs.bandwidth))
    samples = []
    for row in record.kernels:
        try:  # only the precisions and levels the roofs have: a kernel is placed against those
            flops = {p: v for p, v in dict(row.get("flops") or {}).items() if p in roofs.peak_flops}
            levels = {lv: v for lv, v in dict(row.get("bytes") or {}).items() if lv in roofs.bandwidth}
            samples.append(KernelSample(str(row.get("name", "?")), flops, levels, row.get("time_s"),
                                        int(row.get("launches") or 1)))
        except (TypeError, ValueError, AttributeError):
            continue  # a record that passed validation but not the model's checks: left off the chart
    if not samples:
        return [], ""
    ordered = by_time(samples, machine)
    total = sum(kernel_seconds(k, machine) for k in ordered) or 1.0
    points = []
    for rank, kernel in enumerate(ordered):
        seconds = kernel_seconds(kernel, machine)
        if kernel.total_flops <= 0 or seconds <= 0:
            continue
        for level, moved in kernel.bytes.items():
            if moved > 0 and level in roofs.bandwidth:
                points.append(charts.KernelPoint(
                    f"{charts.plotly_text(kernel.name)}<br>{charts.si(kernel.total_flops, 'FLOP')}, "
                    f"{charts.si(moved, 'B')} at {charts.plotly_text(level)}; {seconds / total:.0%} of the time",
                    kernel.total_flops / moved,
                    kernel.total_flops / seconds, level, rank, is_tensor_kernel(kernel), seconds / total))
    rows = kernel_rows(ordered, machine)[:KERNELS_LISTED]
    body = [[pages.wrappable(r["name"]), f"{r['time_share']:.1%}" if r["time_share"] != "" else "—",
             "yes" if r["tensor_core"] else "", charts.si(float(r["flops"]), "FLOP"),
             pages.esc(", ".join(f"{k[6:]} {charts.si(float(v), 'B')}" for k, v in r.items()
                                 if k.startswith("bytes_") and v)),
             f"{r['fraction']:.2f}" if r["fraction"] != "" else "—", pages.esc(r["bound"])] for r in rows]
    found = shares(samples, machine)
    table = ("<h3>Kernels of the latest session</h3>"
             + pages.table(["kernel", "time", "Tensor Cores", "FLOPs", "bytes", "fraction", "bound"], body,
                           numeric=(1, 3, 5))
             + f'<p class="muted">{pages.esc(found.describe())}.</p>')
    return points, table


KERNELS_LISTED = 10  # the longest kernels the test page lists


def _failing_section(rows: pd.DataFrame, artifacts: _Artifacts, root: str) -> str:
    failing = rows[rows["outcome"].isin(["failed", "error"])]
    if failing.empty:
        return "<h2>Failing sessions</h2><p class=\"muted\">None.</p>"
    table_rows = []
    for r in list(failing.itertuples())[::-1][:FAILING_LISTED]:
        links = []
        for path in r.record.artifacts:
            href, why = artifacts.link(r.session_id, str(path))
            name = Path(str(path)).name
            links.append(f'<a href="{pages.esc(root + href)}">{pages.esc(name)}</a>' if href else
                         f'<span class="muted" title="{pages.esc(path)}">{pages.esc(name)} ({pages.esc(why)})</span>')
        table_rows.append([pages.esc(_time(r.start)[:16]), f"<code>{pages.esc(r.commit)}</code>",
                           pages.fraction_text(number(r.fraction), number(r.min_fraction)), pages.esc(r.outcome),
                           "<br>".join(links) or '<span class="muted">none</span>'])
    more = f" (the newest {FAILING_LISTED} of {len(failing)})" if len(failing) > FAILING_LISTED else ""
    return (f"<h2>Failing sessions{more}</h2>" +
            pages.table(["session", "commit", "fraction", "outcome", "artifacts"], table_rows, numeric=(2,)))


def _placed(value: float | None) -> float:
    """A point's coordinate for placing labels; TypeError for a missing one, which no axis range holds."""
    if value is None:
        raise TypeError("a trajectory point has no finite coordinate")
    return value


def _trajectory_page(machine: str, function: str, variants: Sequence[TestSummary], frame: pd.DataFrame,
                     sessions: Sequence[Session]) -> str | None:
    roofs = _roofs(sessions[-1].machine)
    rows = frame[frame["nodeid"].isin([v.nodeid for v in variants])]
    # The first parameter that is a number is the axis the line joins along (batch, threads); the others
    # (precision, AMP) make separate lines.
    first = variants[0].params
    axis = next((k for k, v in first.items() if isinstance(v, (int, float)) and not isinstance(v, bool)),
                next(iter(first)))
    per_session: list[charts.TrajectorySession] = []
    menu: list[str] = []
    xs: list[float] = []
    # One pass over the rows (a groupby per session costs seconds at a thousand sessions). A row is a namedtuple
    # whose class pandas makes per frame: it has no type to name.
    by_position: dict[int, list[Any]] = {}
    for r in rows.itertuples():
        by_position.setdefault(int(r.position), []).append(r)
    for position, group in sorted(by_position.items()):
        lines: dict[str, charts.TrajectoryLine] = {}
        for r in sorted(group, key=lambda r: params_key(r.params)):
            placed, perf = _placed_ai(r.record, roofs.bandwidth), _flops_per_s(r.record)
            if placed is None or perf is None:
                continue
            level, ai = placed
            # plotly reads its labels as a little HTML: names such as gemm<float> are escaped
            others = charts.plotly_text(params_label({k: v for k, v in r.params.items() if k != axis})
                                        or function.split("::")[-1])
            line = lines.setdefault(others, {"x": [], "y": [], "labels": [], "text": []})
            line["x"].append(charts.sig(ai))
            line["y"].append(charts.sig(perf))
            line["labels"].append(charts.plotly_text(r.params.get(axis)))
            fraction = f"{r.fraction:.3f}" if number(r.fraction) is not None else "—"
            line["text"].append(f"{charts.plotly_text(params_label(r.params))}<br>fraction {fraction}, "
                                f"{charts.si(perf, 'FLOP/s')}, AI {ai:.3g} at {charts.plotly_text(level)}")
            xs.append(ai)
        if sum(len(line["x"]) for line in lines.values()) >= 2:
            session = sessions[position]
            shown = f"{_time(session.started)[:16]} {session.short_commit}"
            menu.append(shown)  # the session menu's text, escaped for HTML there
            per_session.append({"label": charts.plotly_text(shown),
                                "lines": [{"name": name, **line} for name, line in lines.items()]})
    if not per_session or not roofs.peak_flops:
        return None
    low, high = charts.x_range(roofs, xs)
    # fixed ranges, so that the label positions chosen here hold in the browser
    x_axis = [math.log10(low), math.log10(high)]
    y_axis = label_layout.log_range(
        [_placed(y) for s in per_session for line in s["lines"] for y in line["y"]] + list(roofs.peak_flops.values()),
        below=3.0)
    layout = charts.roofline_layout(charts.plotly_text(f"{function.split('::')[-1]} by {axis}"), height=520,
                                    x_range=x_axis, y_range=y_axis)
    for session_spec in per_session:
        drawn = session_spec["lines"]
        flat = [(_placed(x), _placed(y), str(label)) for one in drawn
                for x, y, label in zip(one["x"], one["y"], one["labels"])]
        positions = iter(label_layout.text_positions(flat, x_axis, y_axis))
        for one in drawn:
            one["positions"] = [next(positions) for _ in one["x"]]
    spec = {"roofs": charts.roof_traces(roofs, (low, high)), "sessions": per_session,
            "reference": 0, "colours": charts.PALETTE, "layout": layout}
    options = "".join(f'<option value="{i}"{" selected" if i == len(menu) - 1 else ""}>'
                      f"{pages.esc(label)}</option>" for i, label in reversed(list(enumerate(menu))))
    variant_links = ", ".join(f'<a href="../t/{pages.esc(v.page)}">{pages.esc(pages.variant_name(v))}</a>'
                              for v in variants)
    body = (f"<h1>{pages.wrappable(function)}</h1>"
            f'<p class="muted">roofline trajectory on <a href="../machine.html">{pages.esc(machine)}</a>: the '
            f"variants joined in {pages.esc(axis)} order, each at the slowest memory level of its bytes, one chart "
            "per session "
            f"(the first session dotted grey). Variants: {variant_links}</p>"
            f'<p><label>session <select id="session">{options}</select></label></p>'
            '<div class="chart" id="trajectory" data-trajectory="trajectory-data" data-select="session" '
            'style="height:540px"></div>' + pages.json_script("trajectory-data", spec))
    root = "../../../"
    return pages.page(function, root, body, [(f"{root}index.html", "index"), ("../machine.html", "machine")])


def _machine_page(machine: str, sessions: Sequence[Session]) -> str:
    times = [_time(s.started) for s in sessions]
    commits = [s.short_commit for s in sessions]
    roofs = [_roofs(s.machine) for s in sessions]
    # Roofs in the latest session's order (fastest level first, as characterization writes them).
    peaks = list(dict.fromkeys(p for r in reversed(roofs) for p in r.peak_flops))
    levels = list(dict.fromkeys(lv for r in reversed(roofs) for lv in r.bandwidth))
    body = [f"<h1>{pages.esc(machine)}</h1>",
            (f'<p class="muted">{pages.esc(sessions[-1].machine.get("name", ""))} · {len(sessions)} sessions, '
            f"{times[0][:10]} to {times[-1][:10]}</p>")]
    rows = []
    for kind, names, unit in (("peak_flops", peaks, "FLOP/s"), ("bandwidth", levels, "B/s")):
        for name in names:
            values = [getattr(r, kind).get(name) for r in roofs]
            present = [v for v in values if v]
            change = present[-1] / present[0] - 1 if len(present) > 1 else None
            rows.append([pages.esc(name), charts.si(present[0], unit), charts.si(present[-1], unit),
                         pages.percent(change)])
    body.append(pages.table(["roof", "first session", "latest session", "change"], rows, numeric=(1, 2, 3)))
    body.append(pages.chart("peaks", charts.roofs_over_time_figure(
        "Peak FLOP/s per precision", "FLOP/s", times, commits,
        {p: [r.peak_flops.get(p) for r in roofs] for p in peaks})))
    body.append(pages.chart("bandwidth", charts.roofs_over_time_figure(
        "Bandwidth per memory level", "B/s", times, commits,
        {lv: [r.bandwidth.get(lv) for r in roofs] for lv in levels})))
    return pages.page(machine, "../../", "\n".join(body), [("../../index.html", "index")])


def build_site(history: Path, out: Path, machine: str | None = None, since: datetime | None = None,
               plotly_js: str | None = None) -> BuildResult:
    """Write the site; ``plotly_js``: a URL or a path relative to the site's top folder that every page loads
    plotly.js from instead of the site's own copy (several sites published side by side can share one)."""
    began = time.perf_counter()
    check_out(out, history)  # before the history is read: a bad --out is said at once
    try:
        import ruptures  # noqa: F401
    except ImportError:
        raise SiteError("the site needs plotly and ruptures: pip install 'pytest-roofline[site]'") from None
    loaded = load_history(history, machine, since)
    if not loaded.sessions:
        raise SiteError(f"no readable history session in {history}"
                        + (f" for machine {machine!r}" if machine else "")
                        + (f" since {since:%Y-%m-%d}" if since else ""))
    token = pages.PLOTLY.set(plotly_js or pages.PLOTLY_JS)
    try:
        with staged(out, history) as work:
            result = _write_site(history, work, loaded.sessions, loaded.skipped)
    finally:
        pages.PLOTLY.reset(token)
    return BuildResult(out, *result, time.perf_counter() - began)


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _drawn(make: Callable[[], str], title: str, root: str, nav: Sequence[tuple[str, str]]) -> tuple[str, str | None]:
    """The page ``make`` writes, or one saying it was not drawn and why (and the why, for the index)."""
    try:
        return make(), None
    except NOT_DRAWN as exc:
        why = _why(exc)
        return pages.page(title, root, f"<h1>{pages.wrappable(title)}</h1><p class=\"note\">Not drawn: "
                          f"{pages.esc(why)}.</p>", nav), why


def _write_site(history: Path, out: Path, by_machine: Mapping[str, list[Session]],
                skipped: Sequence[Skipped] = ()) -> tuple[int, int, int, int]:
    """Every page into ``out`` (a fresh folder); sessions, tests, pages and bytes written. ``skipped``: the
    files the reader skipped or cut, named on the index."""
    copy_assets(out)
    frame = history_frame(by_machine)
    artifacts = _Artifacts(history, out)
    sections, page_count, test_count = [], 1, 0
    not_drawn: list[Skipped] = []
    folders = page_names(by_machine)  # machine keys are read from the history too: one folder each
    for key, sessions in by_machine.items():
        top = f"m/{folders[key]}"
        folder = out / top
        machine_frame = frame[frame["machine"] == key]
        groups = {nodeid: rows for nodeid, rows in machine_frame.groupby("nodeid", sort=False)}
        names = page_names(groups, ".html")
        summaries = [summarize(key, nodeid, rows, names[nodeid]) for nodeid, rows in groups.items()]
        nav = [("../../../index.html", "index"), ("../machine.html", "machine")]
        trajectories: dict[str, str] = {}
        variants_of = parametrized(summaries)
        files = page_names(variants_of, ".html")
        for function, variants in variants_of.items():
            try:
                text = _trajectory_page(key, function, variants, machine_frame, sessions)
            except NOT_DRAWN as exc:
                not_drawn.append(Skipped(f"{key}: trajectory of {function}", _why(exc)))
                continue
            if text is not None:
                trajectories[function] = files[function]
                _write(folder / "traj" / trajectories[function], text)
                page_count += 1
        index_rows = []
        for summary in sorted(summaries, key=lambda s: s.sort_key):
            trajectory = trajectories.get(summary.function)
            text, why = _drawn(functools.partial(_test_page, summary, groups[summary.nodeid], sessions[-1],
                                                 artifacts, f"../traj/{trajectory}" if trajectory else None, sessions),
                               summary.nodeid, "../../../", nav)
            if why is not None:
                not_drawn.append(Skipped(f"{key}: {summary.nodeid}", why))
            _write(folder / "t" / summary.page, text)
            colour = pages.VERDICT_COLOURS.get(summary.verdict, "#555")
            index_rows.append((summary, f"{top}/t/{summary.page}",
                               charts.sparkline(summary.fractions[-SPARK_SESSIONS:], summary.threshold, colour),
                               f"{top}/traj/{trajectory}" if trajectory else None))
        page_count += len(summaries) + 1
        test_count += len(summaries)
        text, why = _drawn(functools.partial(_machine_page, key, sessions), key, "../../",
                           [("../../index.html", "index")])
        if why is not None:
            not_drawn.append(Skipped(f"{key}: roofs over time", why))
        _write(folder / "machine.html", text)
        sections.append(_index_section(key, top, sessions, summaries, trajectories, index_rows))
    bounds = sorted({b for b in frame["bound"].dropna().unique() if isinstance(b, str)})
    session_count = sum(len(s) for s in by_machine.values())
    _write(out / "index.html", pages.page("index", "", (
        f"<h1>Roofline history</h1><p class=\"muted\">{session_count} sessions on {len(by_machine)} "
        f"machine{'s' if len(by_machine) > 1 else ''}, read from <code>{pages.esc(history)}</code>. "
        "Fraction: the latest session; last week and since baseline compare the median of the last 3 sessions; "
        "verdict: the baseline gate's in the latest session where it ran (time, work and fraction against the "
        "test's baseline sessions; its explanation below), else the <i>trend</i>: last 5 sessions against the 5 "
        "before (Mann-Whitney U, a change of 5 % or more at p &lt; 0.05). Worst first.</p>"
        + skipped_section(skipped, not_drawn) + pages.filters(bounds) + "".join(sections))))
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return session_count, test_count, page_count, size


def _listed(items: Sequence[Skipped]) -> str:
    shown = "".join(f"<li><code>{pages.esc(item.name)}</code>: {pages.esc(item.why)}</li>"
                    for item in items[:SKIPPED_LISTED])
    more = f"<li>and {len(items) - SKIPPED_LISTED} more</li>" if len(items) > SKIPPED_LISTED else ""
    return f"<ul>{shown}{more}</ul>"


def skipped_section(skipped: Sequence[Skipped], not_drawn: Sequence[Skipped] = ()) -> str:
    """The index's list of history files skipped or cut and of pages not drawn, each named with why; empty
    when there are none. A history is written by many hands: what the site leaves out is said on the page,
    not only in a warning on the terminal of whoever built it."""
    if not skipped and not not_drawn:
        return ""
    parts = [('<section class="skipped"><h2>Skipped records</h2><p class="muted">The history is untrusted input '
              "(docs/untrusted-history.md): what the site could not use is named here with why.</p>")]
    if skipped:
        parts.append(f"<h3>{len(skipped)} file{'s' if len(skipped) != 1 else ''} skipped or cut</h3>"
                     + _listed(skipped))
    if not_drawn:
        parts.append(f"<h3>{len(not_drawn)} page{'s' if len(not_drawn) != 1 else ''} not drawn</h3>"
                     + _listed(not_drawn))
    return "".join(parts) + "</section>"


def _index_section(key: str, top: str, sessions: Sequence[Session], summaries: Sequence[TestSummary],
                   trajectories: Mapping[str, str], rows: Sequence[tuple[TestSummary, str, str, str | None]]) -> str:
    """A machine's part of the index; ``top``: its folder under the site (``m/<name>``)."""
    counts = {v: sum(s.verdict == v for s in summaries) for v in pages.VERDICT_COLOURS}
    traj = ", ".join(f'<a href="{top}/traj/{pages.esc(page)}">{pages.esc(function.split("::")[-1])}</a>'
                     for function, page in trajectories.items())
    latest = sessions[-1]
    return (f'<section><div class="machine-head"><h2>{pages.esc(key)}</h2>'
            f'<a href="{top}/machine.html">roofs over time</a></div>'
            f'<p class="muted">{pages.esc(latest.machine.get("name", ""))} · {len(sessions)} sessions, '
            f"latest {_time(latest.started)[:16]} UTC at <code>{pages.esc(latest.short_commit)}</code> · "
            + ", ".join(f"{n} {v}" for v, n in counts.items() if n)
            + (f" · trajectories: {traj}" if traj else "") + "</p>"
            + pages.index_table(rows) + "</section>")
