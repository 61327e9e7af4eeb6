"""Read history files and ``results.json`` files back, skipping what cannot be trusted (docs/history-format.md).

A file that does not parse, is not a history file, has a newer schema or a header that fails
``record.loader`` is skipped and named in ``Loaded.skipped``; so is each test record that fails it (one line
per file, naming the field). The caller says so in one warning. Nothing here raises for a bad file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_roofline.errors import StoreError
from pytest_roofline.history.store import MACHINE_KEY, DirectoryStore, Entry, HistoryStore, read_all
from pytest_roofline.record.loader import (
    MAX_FILE_BYTES,
    Invalid,
    parse_json,
    read_json,
)
from pytest_roofline.record.sessions import Session, session_from


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


def check_placement(name: str, session: Session) -> None:
    """Invalid when an object in a machine's folder holds another machine's session: the folder names the
    machine key of the record it holds, so a record moved or written under another key cannot join that
    machine's baseline. Order and retention go by the record's parsed start, never by the file's name."""
    parts = name.rsplit("/", 2)
    if len(parts) < 2 or not MACHINE_KEY.fullmatch(parts[-2]):
        return  # a results.json or a file outside the store's layout: its content alone decides
    if parts[-2] != session.machine_key:
        raise Invalid(f"machine.key {session.machine_key!r} is not the folder {parts[-2]!r} it sits in")


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
