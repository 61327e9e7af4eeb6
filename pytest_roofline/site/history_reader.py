"""Read a history directory (docs/history-format.md, schema 1): one session per file, grouped by machine.

Every file goes through ``history.validate`` (the reader the gate and ``thresholds`` use as well): a file that
does not parse, is not a history file, has a newer schema or a header that cannot be trusted is skipped with
one warning naming it and the field; a test record that cannot be trusted is left out, one warning per file
naming them. Nothing here stops the reader.

The site computes with what it reads (dates, FLOP/s, ridge points, chained ratios), so it parses further than
the shared reader: ``session.start`` is a time from 2000 to a day past the clock (``parse_time``), and the
numbers it draws lie within physical ranges (``judge_machine``, ``judge_test``). A file that fails is skipped,
a test record that fails is left out; :func:`load_history` returns each of them named with why, for the index
page to list.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pytest_roofline.errors import HistoryFileWarning
from pytest_roofline.history.document import FORMAT, SCHEMA, SessionRecord
from pytest_roofline.history.validate import Invalid, describe_skipped, read_json
from pytest_roofline.output.record import TestRecord

__all__ = ["FORMAT", "SCHEMA", "History", "HistoryFileWarning", "Session", "Skipped", "judge_machine", "judge_test",
           "load_history", "parse_time", "read_history", "read_session"]

# The earliest start a session may have, and how far past the reader's clock one may lie (another runner's
# clock runs a little ahead); a start outside is a forged or broken record, and date arithmetic on it overflows.
EARLIEST = datetime(2000, 1, 1, tzinfo=timezone.utc)
CLOCK_SKEW = timedelta(days=1)

# Physical ranges of the numbers the site computes with: wide enough for any machine and test there is, narrow
# enough that their products and quotients (FLOP/s, ridge points, axis ranges, chained A/B ratios) stay finite.
ROOF_RANGE = (1e3, 1e20)  # a roof: FLOP/s of a precision, bytes/s of a memory level
TIME_RANGE = (1e-12, 1e7)  # seconds of one call: a picosecond to about four months
WORK_RANGE = (0.0, 1e24)  # FLOPs or bytes of one call
AI_RANGE = (1e-12, 1e12)  # FLOPs per byte, or 0: a log axis of intensities starts a quarter below the lowest
RATIO_RANGE = (1e-6, 1e6)  # an A/B time ratio and the ends of its interval


@dataclass(frozen=True)
class Session:
    path: Path
    id: str
    start: datetime
    exit_status: int | None
    commit: str | None
    branch: str | None
    dirty: bool
    machine_key: str
    machine: dict[str, object]
    tests: list[TestRecord] = field(repr=False)

    @property
    def short_commit(self) -> str:
        return (self.commit or "nogit")[:12]


@dataclass(frozen=True)
class Skipped:
    """A file the site skipped, or a file some of whose test records it left out: its name and why."""

    name: str  # the file's path under the history directory
    why: str


@dataclass(frozen=True)
class History:
    """What :func:`load_history` read: sessions by machine key, and every file skipped or cut, named."""

    sessions: dict[str, list[Session]]
    skipped: list[Skipped]


class _Skip(Exception):
    """Why one file is not a readable history file."""


def _shown(value: object, limit: int = 40) -> str:
    """A value as a message quotes it, cut short: a forged field may be megabytes long."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """An ISO time in UTC from :data:`EARLIEST` to ``now`` (the clock) plus :data:`CLOCK_SKEW`; a naive one is
    UTC, so that every start compares with every other. ValueError saying why for anything else."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{_shown(text)} is not an ISO time") from None
    try:
        value = (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
    except OverflowError:  # 9999-12-31T23:59:59-01:00 is a time in the year 10000 in UTC
        raise ValueError(f"{_shown(text)} lies outside the dates UTC holds (years 1 to 9999)") from None
    latest = (now or datetime.now(timezone.utc)) + CLOCK_SKEW
    if not EARLIEST <= value <= latest:
        raise ValueError(f"{_shown(text)} is not between {EARLIEST:%Y-%m-%d} and a day past the clock "
                         f"({latest:%Y-%m-%d %H:%M} UTC)")
    return value


def _outside(value: object, field: str, bounds: tuple[float, float], *, zero: bool = False) -> str | None:
    """Why ``value`` is not a number within ``bounds`` (both ends included; or 0 where ``zero``), or None when it
    is (or is absent)."""
    if value is None:
        return None
    low, high = bounds
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
            and (low <= value <= high or (zero and value == 0)):
        return None
    return f"{field}: {_shown(value)} is not {'0 nor ' if zero else ''}within [{low:g}, {high:g}]"


def _first(*reasons: str | None) -> str | None:
    return next((r for r in reasons if r is not None), None)


def _each(values: object, field: str, bounds: tuple[float, float], *, zero: bool = False) -> str | None:
    """The first entry of a ``{name: number}`` object outside ``bounds`` (0 allowed where ``zero``)."""
    if not isinstance(values, Mapping):
        return None
    return _first(*(_outside(v, f"{field}.{k}", bounds, zero=zero) for k, v in values.items()))


def judge_machine(machine: Mapping[str, object], field: str = "machine") -> str | None:
    """Why a machine block's roofs cannot be drawn (the first outside :data:`ROOF_RANGE`), else None."""
    return _first(_each(machine.get("peak_flops"), f"{field}.peak_flops", ROOF_RANGE),
                  _each(machine.get("bandwidth"), f"{field}.bandwidth", ROOF_RANGE))


def judge_test(record: TestRecord) -> str | None:
    """Why a test record's numbers cannot be drawn (the first field outside its physical range), else None:
    its time and work, intensities, kernels, the roofs it was judged on and its A/B time ratio."""
    reasons = [_outside(record.time_s, "time_s", TIME_RANGE), _outside(record.flops, "flops", WORK_RANGE),
               _each(record.flops_by_precision, "flops_by_precision", WORK_RANGE),
               _each(record.bytes, "bytes", WORK_RANGE), _each(record.ai, "ai", AI_RANGE, zero=True),
               None if record.judged_roofs is None else judge_machine(record.judged_roofs, "judged_roofs")]
    for i, kernel in enumerate(record.kernels):
        reasons += [_outside(kernel.get("time_s"), f"kernels[{i}].time_s", TIME_RANGE),
                    _each(kernel.get("flops"), f"kernels[{i}].flops", WORK_RANGE),
                    _each(kernel.get("bytes"), f"kernels[{i}].bytes", WORK_RANGE)]
    moved = None if record.compare is None else record.compare.time
    if moved is not None:
        reasons.append(_outside(moved.ratio, "compare.changes.time.ratio", RATIO_RANGE))
        reasons += [_outside(end, "compare.changes.time.ci", RATIO_RANGE) for end in moved.ci or ()]
    return _first(*reasons)


def _session(path: Path, document: object, now: datetime | None) -> tuple[Session, list[str]]:
    """The session of one document and the test records left out of it, each named with why."""
    problems: list[str] = []
    try:
        record = SessionRecord.from_dict(document, problems)
    except ValueError as exc:  # Invalid names the field; a results.json or a newer schema says what it is
        raise _Skip(str(exc)) from None
    try:
        start = parse_time(record.session.start or "", now)
    except ValueError as exc:
        raise _Skip(f"session.start: {exc}") from None
    roofs = judge_machine(record.machine)
    if roofs is not None:
        raise _Skip(roofs)
    tests = []
    for test in record.tests:
        why = judge_test(test)
        if why is None:
            tests.append(test)
        else:
            problems.append(f"test {_shown(test.nodeid, 120)}: {why}")
    git = record.session.git
    session = Session(path=path, id=record.session.id or path.stem, start=start,
                      exit_status=record.session.exit_status, commit=git.commit, branch=git.branch,
                      dirty=bool(git.dirty), machine_key=record.machine_key,
                      machine={"key": record.machine_key, "fingerprint": record.fingerprint, **record.machine},
                      tests=tests)
    return session, problems


def _read(path: Path, now: datetime | None) -> tuple[Session | None, str | None]:
    """One file's session (None when it cannot be used) and why it was skipped or cut (None when whole)."""
    try:
        session, problems = _session(path, read_json(path), now)
    except (OSError, ValueError, _Skip) as exc:  # Invalid, JSONDecodeError and UnicodeDecodeError: ValueErrors
        return None, str(exc) if isinstance(exc, (_Skip, Invalid)) else f"{type(exc).__name__}: {exc}"
    if problems:
        return session, describe_skipped("", problems).removeprefix(": ")
    return session, None


def read_session(path: Path, now: datetime | None = None) -> Session | None:
    """One history file, or None (with one HistoryFileWarning naming it) when it cannot be used; test records
    that cannot be trusted are left out with one HistoryFileWarning naming the file and their fields."""
    session, why = _read(path, now)
    if why is not None:
        warnings.warn(f"skipped history file {path}: {why}" if session is None else f"{path}: {why}",
                      HistoryFileWarning, stacklevel=2)
    return session


def load_history(directory: Path, machine: str | None = None, since: datetime | None = None,
                 now: datetime | None = None) -> History:
    """Sessions by ``machine.key`` (the field, not the folder), each list ordered by ``session.start``, and
    every file skipped or cut, named by its path under ``directory`` (one HistoryFileWarning each as well).
    ``now``: the clock a start may lie at most a day past (default: this machine's)."""
    by_machine: dict[str, list[Session]] = {}
    skipped: list[Skipped] = []
    for path in sorted(directory.rglob("*.json")):
        if not path.is_file():
            continue
        session, why = _read(path, now)
        if why is not None:
            skipped.append(Skipped(path.relative_to(directory).as_posix(), why))
            warnings.warn(f"skipped history file {path}: {why}" if session is None else f"{path}: {why}",
                          HistoryFileWarning, stacklevel=2)
        if session is None or (machine is not None and session.machine_key != machine):
            continue
        if since is not None and session.start < since:
            continue
        by_machine.setdefault(session.machine_key, []).append(session)
    for sessions in by_machine.values():
        sessions.sort(key=lambda s: (s.start, s.id))
    return History(dict(sorted(by_machine.items())), skipped)


def read_history(directory: Path, machine: str | None = None,
                 since: datetime | None = None) -> dict[str, list[Session]]:
    """Sessions by ``machine.key`` (the field, not the folder), each list ordered by ``session.start``."""
    return load_history(directory, machine, since).sessions
