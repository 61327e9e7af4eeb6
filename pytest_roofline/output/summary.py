"""The roofline section of the terminal summary, rendered from ``results.json`` test records only.

A serial session and the pytest-xdist controller call the same :func:`summary_lines` over the same records
(the ones written to ``results.json``), so the table, its markers and the lines under it cannot differ between
``pytest`` and ``pytest -n N``, nor disagree with the file. Plain Python, no pytest.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_roofline.history.results_dir import RESULTS_FILE
from pytest_roofline.history.suggested_thresholds import MIN_SESSIONS, Advice
from pytest_roofline.host.cores import Placement
from pytest_roofline.model import Machine
from pytest_roofline.model.above_one import ABOVE_ONE
from pytest_roofline.output.session_output import auto_cores_line, baseline_lines, machine_line, short_machine_line
from pytest_roofline.output.table import LEGEND, MIN_ID, Row, marker_lines, render, shorten_id
from pytest_roofline.output.text import uncounted_text
from pytest_roofline.record.tests import TestRecord

NOT_GATED_WHY = {
    "contended": ("measured under contention (no free core) and excused (--roofline-contended judge or "
                  "--roofline-strict gates them; CI=true judges them by default)"),
    "warn-only": "below their gate under --roofline-warn-only (reported, not failed)",
}


@dataclass(frozen=True)
class SummaryContext:
    """What the summary says besides the tests: the machine(s) and the session's settings."""

    machines: Sequence[Machine] = ()
    fewer_cores: Mapping[int, Machine] = field(default_factory=dict)  # roofs of fewer cores call sites used
    directory: Path | None = None
    counter: str | None = None
    baseline: str | None = None  # the baseline gate's description (None: no --roofline-baseline)
    width: int = 0
    verbose: bool = False  # full machine lines (every roof's source); else one short line each


ERROR_CHARS = 400  # of an error's cause said under the table (results.json keeps more)


def placements(record: TestRecord) -> list[Placement]:
    return [Placement.from_dict(r["cores"]) for r in record.regions if isinstance(r.get("cores"), Mapping)]


def record_uncounted(record: TestRecord) -> str:
    """:func:`.text.uncounted_text` of a record's regions."""
    moved: dict[str, int] = {}
    total = 0.0
    for region in record.regions:
        for op, count in (region.get("uncounted_ops") or {}).items():
            moved[op] = moved.get(op, 0) + int(count)
        total += sum(float(v) for k in region.get("kernels") or [] for v in (k.get("bytes") or {}).values())
    return uncounted_text(moved, total)


def verdict_text(record: TestRecord) -> str:
    """The verdict cell: the outcome, and why in brackets (below min, the baseline's verdict, not gated)."""
    outcome = record.outcome
    if record.nothing_counted is not None:
        return f"{outcome} (no work counted)"
    fraction = record.fraction
    if fraction is None:
        return f"{outcome} (not measured)"
    reason, minimum, baseline, compared = record.not_gated, record.min_fraction, record.baseline, record.compare
    if minimum is not None and fraction < minimum:
        detail = "below min"
    elif baseline is not None and baseline.raw:
        detail = str(baseline.verdict)
    elif compared is not None and compared.verdict:
        detail = f"A/B {compared.verdict}"
    elif minimum is None:
        return f"{outcome} (no gate)"
    else:
        detail = ""
    if reason:  # why is said by the row's markers (contended) and the session's last line
        detail = f"{detail}, not gated" if detail else "not gated"
    return f"{outcome} ({detail})" if detail else outcome


def _rates(record: TestRecord) -> tuple[float | None, float | None]:
    """(FLOPs, bytes at the bound's level, else the level that moved the most) of a record, per call."""
    bound = record.bound or "-"
    by_level = {name: v for name, v in record.bytes.items() if v}
    # as Verdict.bound_level: the bound's level, else the level that moved the most bytes
    level = bound.partition(":")[2] if bound.startswith("memory:") else max(by_level, key=by_level.__getitem__,
                                                                            default=None)
    return record.flops, (by_level.get(level) if level else None)


def marks_of(record: TestRecord) -> tuple[str, dict[str, list[str]]]:
    """The record's marker letters (:data:`table.MARKERS`) and, per letter, what to say of it below."""
    marks, details = "", {}  # type: tuple[str, dict[str, list[str]]]
    # another process on the GPU matters only to a call site whose work ran there (a CUDA session's
    # host code and CPU tests are placed with the GPU's neighbours too)
    shared_gpu = any(isinstance(r.get("cores"), Mapping) and r["cores"].get("gpu_processes")
                     and r.get("device") == "cuda" for r in record.regions)
    for placement in placements(record):
        if placement.contended:
            marks += "c" if "c" not in marks else ""
            load = placement.load_on
            details.setdefault("c", []).append(
                f"core{'s' if placement.count > 1 else ''} {','.join(map(str, placement.used))} of "
                f"{len(placement.allowed)}" + (f" {load:.0%} busy" if load is not None else ""))
    marks += "g" if shared_gpu else ""
    faults = max((float((r.get("timing") or {}).get("faults_per_call") or 0.0) for r in record.regions),
                 default=0.0)
    if faults > 0:
        marks += "f"
        details.setdefault("f", []).append(f"{faults:.0f}/call")
    if record_uncounted(record):
        marks += "u"
    if record.fraction is not None and record.fraction > ABOVE_ONE:
        marks += "!"
        details.setdefault("!", []).append(beaten_roof(record))
    return marks, details


def beaten_roof(record: TestRecord) -> str:
    """``DRAM 45.8 GB/s x1.070``: the roof a fraction above 1 beat, from the roofs it was judged on."""
    kind, _, name = (record.bound or "").partition(":")
    roofs = record.judged_roofs or {}
    table, unit = (roofs.get("bandwidth"), "GB/s") if kind == "memory" else (roofs.get("peak_flops"), "GFLOP/s")
    value = table.get(name) if isinstance(table, Mapping) else None
    shown = f"{name} {value / 1e9:.4g} {unit}" if isinstance(value, (int, float)) else (record.bound or "?")
    return f"{shown} x{record.fraction:.3f}" if record.fraction is not None else shown


def compact_row(record: TestRecord) -> Row:
    fraction = record.fraction
    marks, _ = marks_of(record)
    if fraction is None:
        return Row(record.nodeid, None, record.min_fraction, "-", None, None, None, verdict_text(record), marks)
    time_s = record.time_s or 0.0
    flops, moved = _rates(record)
    return Row(record.nodeid, fraction, record.min_fraction, record.bound or "-", time_s or None,
               flops / time_s / 1e9 if flops is not None and time_s else None,
               moved / time_s / 1e9 if moved is not None and time_s else None, verdict_text(record), marks)


def marked_table(records: Sequence[TestRecord], width: int) -> list[str]:
    """The table, one line per test (markers as letters after the verdict), the markers explained once below
    it, and the legend."""
    rows = [compact_row(r) for r in records]
    details: dict[str, list[str]] = {}
    for record in records:
        for mark, said in marks_of(record)[1].items():
            details.setdefault(mark, []).extend(said)
    return [*render(rows, width), *wrap([*marker_lines(rows, details), LEGEND], width)]


def not_gated_line(records: Sequence[TestRecord]) -> str:
    """``roofline: 3 of 21 tests not gated: 2 measured under contention ...; 1 ...``, or "" when every measured
    test was gated."""
    reasons: dict[str, int] = {}
    for record in records:
        if record.not_gated:
            reasons[record.not_gated] = reasons.get(record.not_gated, 0) + 1
    if not reasons:
        return ""
    count = sum(reasons.values())
    parts = "; ".join(f"{n} {NOT_GATED_WHY.get(reason, reason)}" for reason, n in sorted(reasons.items()))
    return f"roofline: {count} of {len(records)} test{'s' if len(records) != 1 else ''} not gated: {parts}"


def summary_lines(records: Iterable[TestRecord], context: SummaryContext) -> list[str]:
    """The roofline section: machines, the table, what was uncounted, the counter, the cores, the baseline
    gate and where the results are (:func:`not_gated_line` ends it). Lines longer than ``context.width`` are
    wrapped (the table shortens node ids instead)."""
    records = list(records)
    lines: list[str] = []
    describe = machine_line if context.verbose else short_machine_line
    lines += [describe(machine) for machine in context.machines]
    for count, roofs in sorted(context.fewer_cores.items()):
        text = describe(roofs)
        prefix = f"machine: {roofs.name}"
        text = text[len(prefix):].partition(": ")[2] if text.startswith(prefix) else text  # said once above
        lines.append(f"{count}-core roofs (call sites on {count} core{'s' if count > 1 else ''}): {text}")
    table = marked_table(records, context.width)
    tail: list[str] = []
    for record in records:
        missing = record_uncounted(record)
        if missing:
            tail.append(f"uncounted FLOPs in {record.nodeid}: {missing}: their FLOPs are missing from its "
                        "fraction")
        failure = record.extra.get("failure")
        if record.outcome == "error" and isinstance(failure, Mapping):
            cause = " ".join(str(failure.get("message") or "no message").split())
            cause = cause if len(cause) <= ERROR_CHARS else cause[:ERROR_CHARS] + " ..."
            tail.append(f"error in {record.nodeid} ({failure.get('when', '?')}"
                        f"{', ' + str(failure['where']) if failure.get('where') else ''}): {cause}")
        if record.nothing_counted is not None:
            saw = record.nothing_counted.message.partition("\n")[2].strip()
            tail.append(f"no work counted in {record.nodeid}: declare it with roofline.declare(flops=..., "
                        f"bytes=...); {saw}")
    if context.counter:
        tail.append(f"counter: {context.counter}")
    cores_line = auto_cores_line([p for r in records for p in placements(r)])
    if cores_line:
        tail.append(cores_line)
    if context.baseline is not None:
        tail += baseline_lines(context.baseline, records)
    if context.directory is not None:
        tail.append(f"results: {context.directory / RESULTS_FILE}")
    return [*wrap(lines, context.width), *table, *wrap(tail, context.width)]


LONG_WORD = 40  # a path or a node id: never split, and never parted from the label before it


def _labelled_path(line: str) -> bool:
    """``artifact:   /a/long/path``: a label and a long word after it read worse wrapped; left whole."""
    long_words = [word for word in line.split() if len(word) > LONG_WORD]
    if not long_words:
        return False
    before = line[:line.index(long_words[0])].strip()
    return not before or before.endswith(":")


def wrap(lines: Iterable[str], width: int) -> list[str]:
    """Each line within ``width`` columns (0: as it is), continued with an indent of four."""
    out: list[str] = []
    for line in lines:
        if not width or len(line) <= width or _labelled_path(line):
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()) + 4)
        out += textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False,
                             break_long_words=False) or [""]
    return out


MESSAGE_WIDTH = 120  # a failure message does not know the terminal's width; it fits a wide one


def fit_message(text: str, width: int = MESSAGE_WIDTH) -> str:
    """A failure message with every line within ``width`` columns (paths stay whole)."""
    return "\n".join(wrap(text.splitlines(), width))


def thresholds_table(advice: Sequence[Advice], width: int = 0) -> str:
    """The advice as text, one block per machine; with ``width``, test ids are shortened from the middle and a
    warning goes on its own line so that each line fits."""
    lines: list[str] = []
    fixed = 2 + 8 + 7 + 9 + 6 + 6 + 9 + 8 + 7  # the indent, the columns after the id and their spaces
    for key in sorted({a.machine_key for a in advice}):
        rows = [a for a in advice if a.machine_key == key]
        size = max(len(a.nodeid) for a in rows)
        if width:
            size = min(size, max(MIN_ID, width - fixed))
        header = (f"  {'test':{size}s} {'sessions':>8s} {'median':>7s} {'worst/med':>9s} {'sd':>6s} "
                  f"{'now':>6s} {'suggested':>9s} {'catches':>8s}")
        lines += [f"machine {key}:", header]
        for a in rows:
            now = "-" if a.current is None else f"{a.current:.3g}"
            suggested = "-" if a.suggested is None else f"{a.suggested:.3f}"
            catches = "-" if a.catches is None else f"{a.catches:.0%}"
            line = (f"  {shorten_id(a.nodeid, size):{size}s} {a.sessions:8d} {a.median:7.3f} "
                    f"{a.worst / a.median:9.3f} {a.log_sd:6.1%} {now:>6s} {suggested:>9s} {catches:>8s}")
            note = f"  <- {a.warning}" if a.warning else "  (xfail)" if a.expected_failure else ""
            if width and len(line + note) > width and note.strip():
                lines += [line, *wrap([f"    {note.strip()}"], width)]
            else:
                lines.append(line + note)
        if any(a.suggested is None for a in rows):
            lines += wrap([(f"  (-: fewer than {MIN_SESSIONS} sessions; a threshold needs the spread between "
                            "sessions)")], width)
    return "\n".join(lines)
