"""Read a history directory (docs/history-format.md, schema 1): one session per file, grouped by machine.

Every file goes through ``record.loader`` (the reader the gate and ``thresholds`` use as well): a file that
does not parse, is not a history file, has a newer schema or a header that cannot be trusted is skipped with
one warning naming it and the field; a test record that cannot be trusted is left out, one warning per file
naming them. Nothing here stops the reader.

The site computes with what it reads (dates, FLOP/s, ridge points, chained ratios); the shared reader's
parse keeps every number it draws within a physical range and every start within the range a start may have
(``validate.parse_start``). A file that fails is skipped, a test record that fails is left out;
:func:`load_history` returns each of them named with why, for the index page to list.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pytest_roofline.errors import HistoryFileWarning
from pytest_roofline.record.loader import Invalid, describe_skipped, parse_start, read_json
from pytest_roofline.record.sessions import FORMAT, SCHEMA, Session, SessionRecord, start_text

__all__ = ["FORMAT", "SCHEMA", "History", "HistoryFileWarning", "Session", "Skipped", "load_history", "parse_time",
           "read_history", "read_session"]

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
    """A session's start as the shared reader parses it (``validate.parse_start``): an aware UTC time within
    the range a start may have; ValueError (Invalid) saying why otherwise."""
    return parse_start(text, "session.start", now=None if now is None else now.timestamp())


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
        raise _Skip(str(exc)) from None
    return Session.of_record(record, str(path), start_text(start)), problems


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
        if since is not None and session.started < since:
            continue
        by_machine.setdefault(session.machine_key, []).append(session)
    for sessions in by_machine.values():
        sessions.sort(key=lambda s: (s.started, s.id))
    return History(dict(sorted(by_machine.items())), skipped)


def read_history(directory: Path, machine: str | None = None,
                 since: datetime | None = None) -> dict[str, list[Session]]:
    """Sessions by ``machine.key`` (the field, not the folder), each list ordered by ``session.start``."""
    return load_history(directory, machine, since).sessions
