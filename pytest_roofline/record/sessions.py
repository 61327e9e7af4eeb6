"""A session's records (docs/history-format.md). :class:`SessionRecord` is one history file, typed: what the writer
builds; it saves itself (``to_dict``, ``encode``, ``name``), loads a document that passed ``record.loader`` and
brings an older schema to this package's (``MIGRATIONS``). :class:`Session` is the one form every reader loads
(the gates, ``thresholds``, the nightly chain, the site), made by :func:`session_from` from a history file or a
``results.json``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path

from pytest_roofline.record.json_values import migrated, text_of
from pytest_roofline.record.loader import (
    HISTORY_FORMAT,
    HISTORY_SCHEMA,
    check_header,
    describe_skipped,
    parse_start,
    valid_tests,
)
from pytest_roofline.record.machine_key import fingerprint_of, machine_key
from pytest_roofline.record.tests import SCHEMA as SCHEMA_OF_TESTS
from pytest_roofline.record.tests import TestRecord, records_by_id

FORMAT = HISTORY_FORMAT
SCHEMA = HISTORY_SCHEMA  # the newest history schema this package writes and reads

# schema -> the step that turns a history document of that schema into one of the next; none yet
MIGRATIONS: dict[int, Callable[[dict[str, object]], dict[str, object]]] = {}


def _plain(value: object) -> dict[str, object]:
    return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class GitState:
    """The commit a session measured: 40 hex (None outside git), the branch (None when detached), dirty."""

    commit: str | None = None
    branch: str | None = None
    dirty: bool | None = None

    @classmethod
    def from_dict(cls, data: object) -> GitState:
        raw = _plain(data)
        dirty = raw.get("dirty")
        return cls(commit=text_of(raw.get("commit")), branch=text_of(raw.get("branch")),
                   dirty=dirty if isinstance(dirty, bool) else None)

    def to_dict(self) -> dict[str, object]:
        return {"commit": self.commit, "branch": self.branch, "dirty": self.dirty}


@dataclass(frozen=True)
class SessionInfo:
    """The ``session`` block: who ran, when, on which commit and versions, with which arguments and counter."""

    id: str | None = None
    start: str | None = None  # ISO time
    end: str | None = None
    exit_status: int | None = None
    git: GitState = field(default_factory=GitState)
    versions: Mapping[str, str | None] = field(default_factory=dict)  # python, pytest, torch, cuda, driver ...
    pytest_args: tuple[str, ...] = ()
    counter: str | None = None

    @classmethod
    def from_dict(cls, data: object) -> SessionInfo:
        raw = _plain(data)
        status = raw.get("exit_status")
        args = raw.get("pytest_args")
        return cls(id=text_of(raw.get("id")), start=text_of(raw.get("start")), end=text_of(raw.get("end")),
                   exit_status=status if isinstance(status, int) and not isinstance(status, bool) else None,
                   git=GitState.from_dict(raw.get("git")),
                   versions={k: None if v is None else str(v) for k, v in _plain(raw.get("versions")).items()},
                   pytest_args=tuple(str(a) for a in args) if isinstance(args, list) else (),
                   counter=text_of(raw.get("counter")))

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "start": self.start, "end": self.end, "exit_status": self.exit_status,
                "git": self.git.to_dict(), "versions": dict(self.versions), "pytest_args": list(self.pytest_args),
                "counter": self.counter}


def migrate(document: Mapping[str, object], schema: int) -> dict[str, object]:
    """A history document of ``schema`` brought to :data:`SCHEMA`; ValueError for a newer one."""
    return migrated(document, schema, SCHEMA, MIGRATIONS)


@dataclass(frozen=True)
class SessionRecord:
    """One session's history file: its session block, the machine it was judged on and its test records."""

    session: SessionInfo
    machine_key: str
    fingerprint: str | None
    machine: Mapping[str, object]  # the results.json machine block: name, peak_flops, bandwidth, info
    tests: tuple[TestRecord, ...] = ()

    @classmethod
    def of_session(cls, machine: Mapping[str, object] | None, tests: Sequence[TestRecord], session: SessionInfo,
                   ) -> SessionRecord:
        """The record a finished session writes: ``machine`` is ``Machine.to_dict()`` (None: not characterized)."""
        if machine:
            return cls(session=session, machine_key=machine_key(machine), fingerprint=fingerprint_of(machine),
                       machine=dict(machine), tests=tuple(tests))
        return cls(session=session, machine_key=machine_key(None), fingerprint=None,
                   machine={"name": None, "peak_flops": {}, "bandwidth": {}, "info": {}}, tests=tuple(tests))

    @classmethod
    def of_results(cls, results: Mapping[str, object], session: SessionInfo) -> SessionRecord:
        """The entry of a ``results.json`` document (its machine and test records) under ``session``."""
        tests = results.get("tests")
        records = [TestRecord.from_dict(t) for t in tests if isinstance(t, Mapping)] if isinstance(tests, list) else []
        return cls.of_session(_plain(results.get("machine")) or None, records, session)

    @classmethod
    def from_dict(cls, document: object, problems: list[str] | None = None) -> SessionRecord:
        """The record of a history document; Invalid or ValueError (naming the field) when it is not one that
        can be trusted. Test records that fail ``validate.check_test`` are left out, each named in ``problems``."""
        if check_header(document) != "history" or not isinstance(document, dict):
            raise ValueError(f"not a {FORMAT} file")
        data = migrate(document, document["schema"])
        machine = _plain(data.get("machine"))
        key = text_of(machine.pop("key", None)) or machine_key(machine)
        fingerprint = text_of(machine.pop("fingerprint", None))
        tests, skipped = valid_tests(data["tests"] if isinstance(data["tests"], list) else [], SCHEMA_OF_TESTS)
        if problems is not None:
            problems.extend(skipped)
        return cls(session=SessionInfo.from_dict(data.get("session")), machine_key=key, fingerprint=fingerprint,
                   machine=machine, tests=tuple(tests))

    def to_dict(self) -> dict[str, object]:
        return {"format": FORMAT, "schema": SCHEMA, "session": self.session.to_dict(),
                "machine": {"key": self.machine_key, "fingerprint": self.fingerprint, **self.machine},
                "tests": [t.to_dict() for t in self.tests]}

    def encode(self) -> bytes:
        return (json.dumps(self.to_dict(), indent=2, sort_keys=False, allow_nan=False) + "\n").encode("utf-8")

    @property
    def start(self) -> _dt.datetime:
        """The session's start in UTC (a naive time is taken as UTC; none or unreadable: now)."""
        try:
            start = _dt.datetime.fromisoformat(str(self.session.start))
        except ValueError:
            start = _dt.datetime.now(_dt.timezone.utc)
        return start if start.tzinfo else start.replace(tzinfo=_dt.timezone.utc)

    def name(self) -> str:
        """``<machine key>/<YYYYmmddTHHMMSSZ>-<commit 12 hex | nogit>-<4 random hex>.json``: a fresh random
        part on every call, for the writer to draw again when a name is taken."""
        commit = self.session.git.commit
        tag = commit[:12] if commit else "nogit"
        return (f"{self.machine_key}/{self.start.astimezone(_dt.timezone.utc):%Y%m%dT%H%M%SZ}"
                f"-{tag}-{os.urandom(2).hex()}.json")


@dataclass(frozen=True)
class Session:
    """One session as every reader sees it (the gates, ``thresholds``, the nightly chain, the site): its identity
    and its test records by node id, built once from a document that passed ``record.loader``."""

    id: str
    start: str  # canonical_start's one spelling: ordering by the text is ordering by the time; "" for none
    machine_key: str
    commit: str | None
    branch: str | None
    source: str  # the file or object it was read from
    tests: Mapping[str, TestRecord]
    machine: Mapping[str, object] = field(default_factory=dict)  # key, fingerprint and the machine's roofs
    environment: Mapping[str, str] = field(default_factory=dict)  # {"torch": version} where recorded

    @cached_property
    def started(self) -> datetime:
        """The start as a time (UTC), parsed once; the earliest time a start may have where the record has
        none."""
        if not self.start:
            return datetime.min.replace(tzinfo=timezone.utc)
        when = datetime.fromisoformat(self.start)
        return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)

    @property
    def short_commit(self) -> str:
        return (self.commit or "nogit")[:12]

    @classmethod
    def of_record(cls, record: SessionRecord, source: str, start: str) -> Session:
        """The session a history file holds; ``start`` in :func:`canonical_start`'s spelling (the caller parses
        the record's start against its own clock)."""
        git = record.session.git
        return cls(id=record.session.id or Path(source).stem, start=start, machine_key=record.machine_key,
                   commit=git.commit, branch=git.branch, source=source, tests=records_by_id(record.tests),
                   machine={"key": record.machine_key, "fingerprint": record.fingerprint, **record.machine},
                   environment=_environment(record.session.versions))


def session_from(document: object, source: str, skipped: list[str] | None = None) -> Session:
    """A :class:`Session` from a history document or a ``results.json`` document; ValueError (naming the
    field) when neither or when its header cannot be trusted. Test records that fail ``loader.check_test``
    are left out, one line for them all appended to ``skipped``."""
    problems: list[str] = []
    if check_header(document) == "history":
        record = SessionRecord.from_dict(document, problems)
        session = Session.of_record(record, source, canonical_start(record.session.start))
    else:  # a results.json
        if not isinstance(document, dict):  # check_header refused it already; this tells the type checker
            raise ValueError("not a JSON object")
        schema = document["schema"]
        if schema > SCHEMA_OF_TESTS:
            raise ValueError(f"results schema {schema!r} is newer than this reader's {SCHEMA_OF_TESTS}")
        meta, machine = document.get("session") or {}, document.get("machine") or {}
        tests, problems = valid_tests(document["tests"], schema)
        session = Session(id=str(meta.get("id") or Path(source).stem), start=canonical_start(meta.get("start")),
                          machine_key=machine_key(machine), commit=None, branch=None, source=source,
                          tests=records_by_id(tests), machine=machine,
                          environment=_environment(meta.get("versions")))
    if problems and skipped is not None:
        skipped.append(describe_skipped(source, problems))
    return session


def canonical_start(start: object) -> str:
    """A start that passed ``loader.parse_start`` written one way (UTC, microseconds, ``+00:00``), so that
    ordering by the text is ordering by the time; "" where a results.json has none (it sorts first)."""
    if start is None:
        return ""
    return start_text(parse_start(start))


def start_text(when: datetime) -> str:
    """An aware time in :func:`canonical_start`'s one spelling."""
    return f"{when.astimezone(timezone.utc):%Y-%m-%dT%H:%M:%S.%f+00:00}"


def _environment(versions: object) -> dict[str, str]:
    torch = versions.get("torch") if isinstance(versions, Mapping) else None
    return {"torch": str(torch)} if torch else {}
