"""Read a history directory (docs/history-format.md, schema 1): one session per file, grouped by machine.

Every file goes through ``history.validate`` (the reader the gate and ``thresholds`` use as well): a file that
does not parse, is not a history file, has a newer schema or a header that cannot be trusted is skipped with
one warning naming it and the field; a test record that cannot be trusted is left out, one warning per file
naming them. Nothing here stops the reader.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pytest_roofline.errors import HistoryFileWarning
from pytest_roofline.history.document import FORMAT, SCHEMA, SessionRecord
from pytest_roofline.history.validate import Invalid, describe_skipped, read_json
from pytest_roofline.output.record import TestRecord

__all__ = ["FORMAT", "SCHEMA", "HistoryFileWarning", "Session", "parse_time", "read_history", "read_session"]


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


class _Skip(Exception):
    """Why one file is not a readable history file."""


def parse_time(text: str) -> datetime:
    """An ISO time; a naive one is taken as UTC so that every start compares with every other."""
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _session(path: Path, document: object) -> Session:
    problems: list[str] = []
    try:
        record = SessionRecord.from_dict(document, problems)
    except ValueError as exc:  # Invalid names the field; a results.json or a newer schema says what it is
        raise _Skip(str(exc)) from None
    try:
        start = parse_time(record.session.start or "")
    except ValueError:
        raise _Skip("no valid 'session.start'") from None
    if problems:
        warnings.warn(describe_skipped(path, problems), HistoryFileWarning, stacklevel=3)
    git = record.session.git
    return Session(path=path, id=record.session.id or path.stem, start=start, exit_status=record.session.exit_status,
                   commit=git.commit, branch=git.branch, dirty=bool(git.dirty), machine_key=record.machine_key,
                   machine={"key": record.machine_key, "fingerprint": record.fingerprint, **record.machine},
                   tests=list(record.tests))


def read_session(path: Path) -> Session | None:
    """One history file, or None (with one HistoryFileWarning naming it) when it cannot be used; test records
    that cannot be trusted are left out with one HistoryFileWarning naming the file and their fields."""
    try:
        return _session(path, read_json(path))
    except (OSError, ValueError, _Skip) as exc:  # Invalid, JSONDecodeError and UnicodeDecodeError: ValueErrors
        reason = str(exc) if isinstance(exc, (_Skip, Invalid)) else f"{type(exc).__name__}: {exc}"
        warnings.warn(f"skipped history file {path}: {reason}", HistoryFileWarning, stacklevel=2)
        return None


def read_history(directory: Path, machine: str | None = None,
                 since: datetime | None = None) -> dict[str, list[Session]]:
    """Sessions by ``machine.key`` (the field, not the folder), each list ordered by ``session.start``."""
    by_machine: dict[str, list[Session]] = {}
    for path in sorted(directory.rglob("*.json")):
        if not path.is_file():
            continue
        session = read_session(path)
        if session is None or (machine is not None and session.machine_key != machine):
            continue
        if since is not None and session.start < since:
            continue
        by_machine.setdefault(session.machine_key, []).append(session)
    for sessions in by_machine.values():
        sessions.sort(key=lambda s: (s.start, s.id))
    return dict(sorted(by_machine.items()))
