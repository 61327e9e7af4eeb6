"""Read a history directory (docs/history-format.md, schema 1): one session per file, grouped by machine.

A file that does not parse, is not a history file, or has a newer schema is skipped with one warning
naming it; it never stops the reader.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_roofline.errors import HistoryFileWarning

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
    tests: list[dict[str, Any]] = field(repr=False)

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
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise _Skip(f"not a {FORMAT} file")
    schema = document.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise _Skip("no integer 'schema'")
    if schema > SCHEMA:
        raise _Skip(f"schema {schema} is newer than this reader's {SCHEMA}")
    session, machine, tests = document.get("session"), document.get("machine"), document.get("tests")
    if not isinstance(session, dict) or not isinstance(machine, dict) or not isinstance(tests, list):
        raise _Skip("'session', 'machine' or 'tests' missing")
    if not isinstance(machine.get("key"), str) or not machine["key"]:
        raise _Skip("no 'machine.key'")
    try:
        start = parse_time(session["start"])
    except (KeyError, TypeError, ValueError):
        raise _Skip("no valid 'session.start'") from None
    raw_git = session.get("git")
    git: dict[str, Any] = raw_git if isinstance(raw_git, dict) else {}
    return Session(path=path, id=str(session.get("id", path.stem)), start=start,
                   exit_status=session.get("exit_status"), commit=git.get("commit"), branch=git.get("branch"),
                   dirty=bool(git.get("dirty")), machine_key=machine["key"], machine=machine,
                   tests=[t for t in tests if isinstance(t, dict) and isinstance(t.get("nodeid"), str)])


def read_session(path: Path) -> Session | None:
    """One history file, or None (with one HistoryFileWarning naming it) when it cannot be used."""
    try:
        return _session(path, json.loads(path.read_bytes()))
    except (OSError, ValueError, _Skip) as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        reason = str(exc) if isinstance(exc, _Skip) else f"{type(exc).__name__}: {exc}"
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
