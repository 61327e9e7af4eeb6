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
from typing import Any

from pytest_roofline.errors import HistoryFileWarning
from pytest_roofline.history.validate import Invalid, check_header, describe_skipped, read_json, valid_tests
from pytest_roofline.output.record import TestRecord

__all__ = ["FORMAT", "SCHEMA", "HistoryFileWarning", "Session", "parse_time", "read_history", "read_session"]

FORMAT = "pytest-roofline-history"
SCHEMA = 1


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
    machine: dict[str, Any]
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


def _session(path: Path, document: Any) -> Session:
    try:
        kind = check_header(document)
    except Invalid as exc:
        raise _Skip(str(exc)) from None
    if kind != "history":
        raise _Skip(f"not a {FORMAT} file")
    schema = document["schema"]
    if schema > SCHEMA:
        raise _Skip(f"schema {schema} is newer than this reader's {SCHEMA}")
    session, machine = document.get("session"), document.get("machine")
    if not isinstance(session, dict) or not isinstance(machine, dict):
        raise _Skip("'session' or 'machine' missing")
    if not isinstance(machine.get("key"), str) or not machine["key"]:
        raise _Skip("no 'machine.key'")
    try:
        start = parse_time(session["start"])
    except (KeyError, TypeError, ValueError):
        raise _Skip("no valid 'session.start'") from None
    raw_git = session.get("git")
    git: dict[str, Any] = raw_git if isinstance(raw_git, dict) else {}
    tests, problems = valid_tests(document["tests"])
    if problems:
        warnings.warn(describe_skipped(path, problems), HistoryFileWarning, stacklevel=3)
    exit_status = session.get("exit_status")
    return Session(path=path, id=str(session.get("id", path.stem)), start=start,
                   exit_status=exit_status if isinstance(exit_status, int) else None, commit=git.get("commit"),
                   branch=git.get("branch"), dirty=bool(git.get("dirty")), machine_key=machine["key"],
                   machine=machine, tests=tests)


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
