"""Read history files and ``results.json`` files back, skipping what cannot be trusted (docs/history-format.md).

A file that does not parse, is not a history file, has a newer schema or a header that fails
``history.validate`` is skipped and named in ``Loaded.skipped``; so is each test record that fails it (one line
per file, naming the field). The caller says so in one warning. Nothing here raises for a bad file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pytest_roofline.errors import StoreError
from pytest_roofline.history.document import SessionRecord
from pytest_roofline.history.machine_key import machine_key
from pytest_roofline.history.store import MACHINE_KEY, DirectoryStore, Entry, HistoryStore, read_all
from pytest_roofline.history.validate import (
    MAX_FILE_BYTES,
    Invalid,
    check_header,
    describe_skipped,
    parse_json,
    parse_start,
    read_json,
    valid_tests,
)
from pytest_roofline.output.record import SCHEMA as SCHEMA_OF_TESTS
from pytest_roofline.output.record import TestRecord, records_by_id


@dataclass(frozen=True)
class Session:
    """One session as every reader sees it (the gates, ``thresholds``, the nightly chain, the site): its identity
    and its test records by node id, built once from a document that passed ``history.validate``."""

    id: str
    start: str  # canonical_start's one spelling: ordering by the text is ordering by the time; "" for none
    machine_key: str
    commit: str | None
    branch: str | None
    source: str  # the file or object it was read from
    tests: Mapping[str, TestRecord]
    machine: Mapping[str, object] = field(default_factory=dict)  # key, fingerprint and the machine's roofs
    environment: Mapping[str, str] = field(default_factory=dict)  # {"torch": version} where recorded
    exit_status: int | None = None
    dirty: bool = False

    @property
    def started(self) -> datetime:
        """The start as a time (UTC); the earliest time a start may have where the record has none."""
        if not self.start:
            return datetime.min.replace(tzinfo=timezone.utc)
        when = datetime.fromisoformat(self.start)
        return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)

    @property
    def short_commit(self) -> str:
        return (self.commit or "nogit")[:12]


@dataclass
class Loaded:
    sessions: list[Session] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "<path>: <why>"
    notes: list[str] = field(default_factory=list)  # what a machine's read left unread (other machines)
    listed: int = 0  # objects listed for this read
    unreadable: list[str] = field(default_factory=list)  # listed, but the store would not give their bytes
    refused: list[str] = field(default_factory=list)  # read, but not a record that can be trusted

    def blind(self) -> str | None:
        """Why a gate reading this cannot judge (None: it can): an object was listed but could not be read (it
        may hold the very sessions a test is judged against), or every object listed was refused. A few refused
        among readable ones are warned about, not fatal: one forged object must not switch a gate off."""
        if self.unreadable:
            return (f"{len(self.unreadable)} of {self.listed} history object(s) listed could not be read: "
                    + "; ".join(self.unreadable[:3]) + ("; ..." if len(self.unreadable) > 3 else ""))
        if self.listed and not self.sessions and self.refused:
            return (f"all {self.listed} history object(s) listed were refused: "
                    + "; ".join(self.refused[:3]) + ("; ..." if len(self.refused) > 3 else ""))
        return None


def session_from(document: object, source: str, skipped: list[str] | None = None) -> Session:
    """A :class:`Session` from a history document or a ``results.json`` document; ValueError (naming the
    field) when neither or when its header cannot be trusted. Test records that fail ``validate.check_test``
    are left out, one line for them all appended to ``skipped``."""
    problems: list[str] = []
    if check_header(document) == "history":
        record = SessionRecord.from_dict(document, problems)
        session = Session(id=record.session.id or Path(source).stem, start=canonical_start(record.session.start),
                          machine_key=record.machine_key, commit=record.session.git.commit,
                          branch=record.session.git.branch, source=source, tests=records_by_id(record.tests),
                          machine={"key": record.machine_key, "fingerprint": record.fingerprint, **record.machine},
                          environment=_environment(record.session.versions),
                          exit_status=record.session.exit_status, dirty=bool(record.session.git.dirty))
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
    """A start that passed ``validate.parse_start`` written one way (UTC, microseconds, ``+00:00``), so that
    ordering by the text is ordering by the time; "" where a results.json has none (it sorts first)."""
    if start is None:
        return ""
    return start_text(parse_start(start))


def start_text(when: datetime) -> str:
    """An aware time in :func:`canonical_start`'s one spelling."""
    return f"{when.astimezone(timezone.utc):%Y-%m-%dT%H:%M:%S.%f+00:00}"


def check_placement(name: str, session: Session) -> None:
    """Invalid when an object in a machine's folder holds another machine's session: the folder names the
    machine key of the record it holds, so a record moved or written under another key cannot join that
    machine's baseline. Order and retention go by the record's parsed start, never by the file's name."""
    parts = name.rsplit("/", 2)
    if len(parts) < 2 or not MACHINE_KEY.fullmatch(parts[-2]):
        return  # a results.json or a file outside the store's layout: its content alone decides
    if parts[-2] != session.machine_key:
        raise Invalid(f"machine.key {session.machine_key!r} is not the folder {parts[-2]!r} it sits in")


def _environment(versions: object) -> dict[str, str]:
    torch = versions.get("torch") if isinstance(versions, Mapping) else None
    return {"torch": str(torch)} if torch else {}


def read_file(path: Path, loaded: Loaded) -> None:
    loaded.listed += 1
    try:
        loaded.sessions.append(session_from(read_json(path), str(path), loaded.skipped))
    except OSError as exc:
        loaded.skipped.append(f"{path}: {exc}")
        loaded.unreadable.append(f"{path}: {exc}")
    except ValueError as exc:  # Invalid, JSONDecodeError and UnicodeDecodeError are ValueErrors
        loaded.skipped.append(f"{path}: {exc}")
        loaded.refused.append(f"{path}: {exc}")


def check_reference(reference: Path | HistoryStore) -> None:
    """Raise ValueError (or OSError) saying why ``reference`` is neither a history directory nor a history
    file or a ``results.json``; a file is read as the gate would read it, bounded in size and depth. A store
    is not contacted here (it is at its first use)."""
    if not isinstance(reference, Path) or reference.is_dir():
        return
    if not reference.exists():
        raise FileNotFoundError("no such file or directory")
    session_from(read_json(reference), str(reference))


def machine_entries(store: HistoryStore, key: str, recent: int | None) -> tuple[list[Entry], list[str]]:
    """The objects a gate of machine ``key`` reads: its folder's newest ``recent`` (names start with the
    session's UTC start, so name order is time order) and, in a local directory, any file outside a machine
    folder (a results.json, a merged artifact's odd layout). The other folders are not read: the notes
    say how many sessions they hold."""
    if store.remote:
        mine, others = store.entries(folder=key), []
    else:
        everything = store.entries()
        mine = [e for e in everything if e.folder == key or not MACHINE_KEY.fullmatch(e.folder)]
        others = [e for e in everything if e.folder != key and MACHINE_KEY.fullmatch(e.folder)]
    if recent is not None:
        # by the file's name (its UTC start first), not its path: nested artifact folders must not decide
        in_folder = sorted((e for e in mine if e.folder == key), key=lambda e: e.name.rsplit("/", 1)[-1])
        loose = [e for e in mine if e.folder != key]
        mine = loose + in_folder[-recent:]
    notes = []
    if others:
        keys = sorted({e.folder for e in others})
        notes.append(f"{len(others)} session(s) of other machines ({', '.join(keys)}) left out; this machine is "
                     f"{key} (--roofline-baseline-any-machine compares them)")
    return mine, notes


def load(reference: Path | HistoryStore, *, key: str | None = None, recent: int | None = None) -> Loaded:
    """A history (a directory or another store), a history file or a ``results.json``; sessions ordered by
    start time. ``key``: read only that machine's sessions (:func:`machine_entries`), its newest ``recent``.
    StoreError when a store cannot be listed; an object that cannot be read is skipped and named."""
    loaded = Loaded()
    if isinstance(reference, Path) and not reference.is_dir() and not reference.exists():
        return loaded  # a history that holds nothing yet (a first night): nothing listed, nothing refused
    if isinstance(reference, Path) and not reference.is_dir():
        read_file(reference, loaded)
    else:
        store = reference if not isinstance(reference, Path) else DirectoryStore(reference)
        if key is None:
            entries = store.entries()
        else:
            entries, loaded.notes = machine_entries(store, key, recent)
        names = [e.name for e in entries]
        loaded.listed = len(names)
        for name, data in read_all(store, names, MAX_FILE_BYTES):
            source = f"{store.url}/{name}"
            if isinstance(data, StoreError):  # its message names the object already
                loaded.skipped.append(str(data))
                loaded.unreadable.append(str(data))
                continue
            try:
                session = session_from(parse_json(data), source, loaded.skipped)
                check_placement(name, session)
            except ValueError as exc:  # Invalid, JSONDecodeError and UnicodeDecodeError are ValueErrors
                loaded.skipped.append(f"{source}: {exc}")
                loaded.refused.append(f"{source}: {exc}")
                continue
            loaded.sessions.append(session)
    unique: dict[tuple[str, str], Session] = {}
    for session in loaded.sessions:  # one session copied twice (a results.json beside its history file)
        unique.setdefault((session.id, session.start), session)
    # the canonical start orders as time does; the source breaks ties the same way on every reader
    loaded.sessions = sorted(unique.values(), key=lambda s: (s.start, s.source))
    return loaded
