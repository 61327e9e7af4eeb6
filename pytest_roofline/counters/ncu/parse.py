"""Parse Nsight Compute CSV output into one record per kernel launch (values in SI units).

Two layouts exist (research §5.2, §5.3):

* **details / --metrics, long**: one row per launch × metric: ``ID, Process ID, …, Kernel Name, …, Section Name,
  Metric Name, Metric Unit, Metric Value`` and, when sections with rules were collected, rule columns. Metric rows
  are then shorter than the header (ragged), and rule rows have no metric at all.
* **raw page, wide**: one header row with every metric name, a units row, then one row per launch.

What real files do and this parser survives: application stdout and ``==PROF==``/``==WARNING==`` lines before or
among the rows (they are kept in ``messages``); thousands separators; auto-scaled units; ``n/a`` (absent, not
zero); demangled kernel names with commas (always quoted); many launches of one kernel (one ``ID`` each); the 2020
``Kernel Time`` column, which is a wall-clock timestamp, not a duration (ignored).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from pytest_roofline.counters.ncu.metrics import parse_cc
from pytest_roofline.counters.ncu.ncu_units import NonFiniteNumber, is_known_unit, to_si
from pytest_roofline.errors import NcuParseError

FORMAT_DETAILS = "details"
FORMAT_RAW = "raw"
# Our trimmed reports (counters/ncu/trim.py) carry each launch's pytest_roofline ranges in this column,
# ";"-separated; ncu's own CSV pages have no such column (its NVTX context is read from .ncu-rep files).
RANGE_COLUMN = "NVTX Range"

_METRIC_NAME_RE = re.compile(r"^[a-z0-9]+__[A-Za-z0-9_.]+$")
_MAX_RECORD_LINES = 50  # a quoted field never spans more; past that the opening line was not CSV


@dataclass
class LaunchRecord:
    """One profiled kernel launch: its metrics in SI units (``None`` where ncu printed ``n/a``)."""

    launch_id: str
    kernel: str
    metrics: dict[str, float | None] = field(default_factory=dict)
    labels: dict[str, float | None] = field(default_factory=dict)  # section rows by "Section/Label"
    text: dict[str, str] = field(default_factory=dict)  # values that are not numbers
    cc: tuple[int, int] | None = None
    device: str | None = None
    ranges: tuple[str, ...] = ()  # the pytest_roofline NVTX start/end ranges the launch ran in

    def finish(self) -> None:
        """Fill ``cc`` and ``device`` from device attributes when the columns did not give them."""
        major = self.metrics.get("device__attribute_compute_capability_major")
        minor = self.metrics.get("device__attribute_compute_capability_minor")
        if self.cc is None and major is not None and minor is not None:
            self.cc = (int(major), int(minor))
        name = self.text.get("device__attribute_display_name")
        if name:
            self.device = name


@dataclass
class ParsedLaunches:
    format: str
    launches: list[LaunchRecord]
    messages: list[str]
    skipped_lines: int
    rule_rows: int = 0
    problems: list[str] = field(default_factory=list)  # malformed rows and cells, by line and column


def is_metric_name(name: str) -> bool:
    return bool(_METRIC_NAME_RE.match(name))


def _fields(record: str) -> list[str]:
    return next(csv.reader(io.StringIO(record)), [])


def _is_header(fields: list[str]) -> bool:
    return bool(fields) and fields[0].strip() == "ID" and "Kernel Name" in fields


def _records(lines: list[str], messages: list[str]) -> Iterator[tuple[int, str | None, str]]:
    """Logical CSV records after the header, each with the index of its first line: ``(index, record, "")``,
    or ``(index, None, why)`` for a line skipped as not CSV (``why`` empty for application output, the
    reason for a line that starts as a row of the table but is not one).

    A record may span lines when a quoted field holds a newline, so lines are joined until quotes balance.
    """
    index = 0
    while index < len(lines):
        first = lines[index].strip()
        if not first:
            index += 1
            continue
        if first.startswith("=="):
            messages.append(first)
            index += 1
            continue
        if not (first.startswith(('"', ",")) or first[0].isdigit()):
            yield index, None, ""  # application output among the rows
            index += 1
            continue
        end = index
        joined = lines[index]
        while joined.count('"') % 2 and end + 1 < len(lines) and end - index < _MAX_RECORD_LINES:
            end += 1
            joined += "\n" + lines[end]
        if joined.count('"') % 2:
            yield index, None, "unbalanced quotes" if first.startswith('"') else ""
            index += 1
            continue
        yield index, joined, ""
        index = end + 1


def _launch_key(fields: list[str], columns: dict[str, int]) -> str | None:
    launch_id = fields[columns["ID"]].strip()
    if not launch_id.isdigit():
        return None
    process = fields[columns["Process ID"]].strip() if "Process ID" in columns else ""
    return f"{process}:{launch_id}" if process else launch_id


def _store(record: LaunchRecord, name: str, value: str, unit: str, where: str, problems: list[str]) -> None:
    """One metric in SI units; text where it is no number. An unknown unit or an infinite number is named in
    ``problems`` (``where``: the line and column) and the metric left out: never read as seconds or bytes."""
    _store_in(record, record.metrics, name, f"metric {name}", value, unit, where, problems)


def _store_label(record: LaunchRecord, label: str, value: str, unit: str, where: str, problems: list[str]) -> None:
    """A section row (``Section/Label``), as :func:`_store` stores a metric."""
    _store_in(record, record.labels, label, label, value, unit, where, problems)


def _store_in(record: LaunchRecord, numbers: dict[str, float | None], key: str, named: str, value: str, unit: str,
              where: str, problems: list[str]) -> None:
    if not is_known_unit(unit):
        problems.append(f"{where}: unknown unit {unit.strip()!r} ({named})")
        return
    try:
        numbers[key] = to_si(value, unit)
    except NonFiniteNumber as exc:
        problems.append(f"{where}: {exc} ({named})")
    except ValueError:
        record.text[key] = value.strip()


def _new_launch(key: str, fields: list[str], columns: dict[str, int]) -> LaunchRecord:
    launch = LaunchRecord(launch_id=key, kernel=fields[columns["Kernel Name"]])
    if RANGE_COLUMN in columns:
        launch.ranges = tuple(r for r in fields[columns[RANGE_COLUMN]].split(";") if r)
    if "CC" in columns:
        try:
            launch.cc = parse_cc(fields[columns["CC"]])
        except ValueError:
            launch.cc = None
    return launch


def parse_csv_text(text: str) -> ParsedLaunches:
    """Parse ncu's ``--csv`` output, in either layout, with whatever surrounds it."""
    lines = text.splitlines()
    messages: list[str] = []
    header_index = None
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("=="):
            messages.append(stripped)
        elif stripped.startswith(('"ID"', "ID,")) and _is_header(_fields(stripped)):
            header_index = index
            break
    if header_index is None:
        told = "; ".join(m for m in messages if m.startswith(("==ERROR", "==WARNING"))) or "none"
        raise NcuParseError(
            "no Nsight Compute CSV table found (expected a header line starting with \"ID\",\"Process ID\"); "
            f"ncu errors and warnings in the text: {told}"
        )
    header = [name.strip() for name in _fields(lines[header_index])]
    columns = {name: i for i, name in enumerate(header) if name}
    long_format = "Metric Name" in columns and "Metric Value" in columns
    launches: dict[str, LaunchRecord] = {}
    skipped = 0
    rule_rows = 0
    units: list[str] | None = None
    problems: list[str] = []
    metric_columns = [i for i, name in enumerate(header) if is_metric_name(name)]
    needed = max([columns["Metric Value"]] if long_format else metric_columns or [columns["ID"]])
    for offset, record, why in _records(lines[header_index + 1:], messages):
        lineno = header_index + offset + 2  # 1-based, in the whole text
        if record is None:
            skipped += 1
            if why:
                problems.append(f"line {lineno}: {why}")
            continue
        fields = _fields(record)
        quoted = record.lstrip().startswith('"')  # ncu quotes every field; anything else may be program output
        if quoted and len(fields) > len(header):
            problems.append(f"line {lineno}: {len(fields)} fields, the header has {len(header)}")
            continue
        if quoted and len(fields) <= needed:
            problems.append(f"line {lineno}: {len(fields)} fields, no column {header[needed]!r} (field {needed + 1})")
            continue
        if len(fields) < len(header):
            fields += [""] * (len(header) - len(fields))  # ragged rows: the rule columns are left off
        if not long_format and units is None and not fields[columns["ID"]].strip():
            units = fields  # the raw page's units row
            continue
        key = _launch_key(fields, columns)
        if key is None:
            skipped += 1
            if quoted:
                problems.append(f"line {lineno}, column 'ID': {fields[columns['ID']].strip()!r} is not a launch id")
            continue
        launch = launches.get(key)
        if launch is None:
            launch = launches[key] = _new_launch(key, fields, columns)
        if long_format:
            name = fields[columns["Metric Name"]].strip()
            if not name:
                rule_rows += 1
                continue
            unit = fields[columns["Metric Unit"]] if "Metric Unit" in columns else ""
            value = fields[columns["Metric Value"]]
            where = f"line {lineno}, column {'Metric Value' if is_known_unit(unit) else 'Metric Unit'!r}"
            if is_metric_name(name):
                _store(launch, name, value, unit, where, problems)
            else:
                section = fields[columns["Section Name"]].strip() if "Section Name" in columns else ""
                _store_label(launch, f"{section}/{name}", value, unit, where, problems)
        else:
            for index in metric_columns:
                unit = units[index] if units and index < len(units) else ""
                _store(launch, header[index], fields[index], unit, f"line {lineno}, column {header[index]!r}",
                       problems)
    for launch in launches.values():
        launch.finish()
    return ParsedLaunches(FORMAT_DETAILS if long_format else FORMAT_RAW, list(launches.values()), messages, skipped,
                          rule_rows, problems)
