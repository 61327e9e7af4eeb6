"""Read history files and ``results.json`` files back, skipping what cannot be trusted (docs/history-format.md).

A file that does not parse, is not a history file, has a newer schema or a header that fails
``history.validate`` is skipped and named in ``Loaded.skipped``; so is each test record that fails it (one line
per file, naming the field). The caller says so in one warning. Nothing here raises for a bad file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_roofline.history.machine_key import machine_key
from pytest_roofline.history.validate import check_header, describe_skipped, read_json, valid_tests
from pytest_roofline.history.writer import SCHEMA

RESULTS_SCHEMA = 1  # output.artifacts.SCHEMA_VERSION, the newest results.json this reader knows


@dataclass(frozen=True)
class Session:
    """One session as the gate and the site see it: its identity and its test records by node id."""

    id: str
    start: str
    machine_key: str
    commit: str | None
    branch: str | None
    source: str  # the file it was read from
    tests: Mapping[str, Mapping[str, Any]]
    machine: Mapping[str, Any] | None = None
    environment: Mapping[str, Any] = field(default_factory=dict)  # {"torch": version} where recorded


@dataclass
class Loaded:
    sessions: list[Session] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "<path>: <why>"


def session_from(document: Any, source: str, skipped: list[str] | None = None) -> Session:
    """A :class:`Session` from a history document or a ``results.json`` document; ValueError (naming the
    field) when neither or when its header cannot be trusted. Test records that fail ``validate.check_test``
    are left out, one line for them all appended to ``skipped``."""
    kind = check_header(document)
    schema = document["schema"]
    if kind == "history":
        if schema > SCHEMA:
            raise ValueError(f"schema {schema!r} is newer than this reader's {SCHEMA}")
        session, machine = document.get("session") or {}, document.get("machine") or {}
        git = session.get("git") or {}
        key = str(machine.get("key") or machine_key(machine))
    else:  # a results.json
        if schema > RESULTS_SCHEMA:
            raise ValueError(f"results schema {schema!r} is newer than this reader's {RESULTS_SCHEMA}")
        session, machine, git = document.get("session") or {}, document.get("machine") or {}, {}
        key = machine_key(machine)
    tests, problems = valid_tests(document["tests"])
    if problems and skipped is not None:
        skipped.append(describe_skipped(source, problems))
    return Session(id=str(session.get("id") or Path(source).stem), start=str(session.get("start") or ""),
                   machine_key=key, commit=git.get("commit"), branch=git.get("branch"), source=source,
                   tests={str(t["nodeid"]): t for t in tests}, machine=machine or None,
                   environment=_environment(session))


def _environment(session: Any) -> dict[str, Any]:
    versions = session.get("versions") if isinstance(session, dict) else None
    torch = versions.get("torch") if isinstance(versions, dict) else None
    return {"torch": str(torch)} if torch else {}


def read_file(path: Path, loaded: Loaded) -> None:
    try:
        loaded.sessions.append(session_from(read_json(path), str(path), loaded.skipped))
    except (OSError, ValueError) as exc:  # Invalid, JSONDecodeError and UnicodeDecodeError are ValueErrors
        loaded.skipped.append(f"{path}: {exc}")


def check_reference(reference: Path) -> None:
    """Raise ValueError (or OSError) saying why ``reference`` is neither a history directory nor a history
    file or a ``results.json``; a file is read as the gate would read it, bounded in size and depth."""
    if reference.is_dir():
        return
    if not reference.exists():
        raise FileNotFoundError("no such file or directory")
    session_from(read_json(reference), str(reference))


def history_files(directory: Path) -> Iterable[Path]:
    """Every ``*.json`` under the directory, at any depth (merged CI artifacts nest folders)."""
    return sorted(p for p in directory.rglob("*.json") if p.is_file() and not p.name.startswith("."))


def load(reference: Path) -> Loaded:
    """A history directory, a history file or a ``results.json``; sessions ordered by start time."""
    loaded = Loaded()
    if reference.is_dir():
        for path in history_files(reference):
            read_file(path, loaded)
    else:
        read_file(reference, loaded)
    unique: dict[tuple[str, str], Session] = {}
    for session in loaded.sessions:  # one session copied twice (a results.json beside its history file)
        unique.setdefault((session.id, session.start), session)
    loaded.sessions = sorted(unique.values(), key=lambda s: s.start)
    return loaded
