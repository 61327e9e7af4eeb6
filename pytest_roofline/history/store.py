"""Where the history lives: a local directory, an object store (``s3://``, ``gs://``, ``az://``) or a branch of
the repository (``git:BRANCH``), behind one small Protocol.

Every store holds one immutable object per session, named ``<machine key>/<UTC start>-<commit>-<random>.json``
(docs/history-format.md). Writers only ever *create* (an object that exists is never overwritten: a new name is
drawn), so N runners writing at once need no lock and lose nothing, and a reader only ever sees whole sessions.
A create whose outcome is unknown (a timeout, a server error) raises :class:`WriteInDoubt`; :func:`create_once`
reads the name back before anything else is tried, so one session is never stored under two names.
Retention deletes whole objects. Names read back from a store are untrusted: :func:`safe_name` refuses anything
that could leave the store's folder when a copy is written locally.

Plain Python. ``history.location`` opens the store a path or URL names; the object-store and git backends
(``object_store``, ``git_store``) import their libraries only when a store of theirs is opened.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from pytest_roofline._atomic import write_bytes_new
from pytest_roofline.errors import NoSuchObject, StoreError, WriteInDoubt
from pytest_roofline.record.loader import MAX_FILE_BYTES, read_bytes

_NAME = re.compile(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")
# a machine key (record.machine_key): a readable name and 8 hex of the fingerprint
MACHINE_KEY = re.compile(r"[a-z0-9-]+-[0-9a-f]{8}")
CREATE_TRIES = 3  # creates of one name whose outcome was unknown, each followed by a read-back

Read = tuple[str, bytes | StoreError]  # one object of read_all: its name and its bytes, or why it was not read


@dataclass(frozen=True)
class Entry:
    """One object of a store: its ``/``-separated name under the store's root, its size and when it was last
    written (seconds since the epoch, where the store says)."""

    name: str
    size: int | None = None
    modified: float | None = None

    @property
    def folder(self) -> str:
        return self.name.rsplit("/", 2)[-2] if "/" in self.name else ""


@runtime_checkable
class HistoryStore(Protocol):
    """What the history needs of a store. ``url``: printable, never a credential; ``remote``: not this
    machine's disk (its failures fail the session: a gate must not pass blind)."""

    url: str
    remote: bool

    def entries(self, folder: str | None = None) -> list[Entry]:
        """Every ``*.json`` object, sorted by name; ``folder``: only those directly in that folder (one
        machine key's). StoreError when the store cannot be listed."""
        ...

    def read(self, name: str, max_bytes: int) -> bytes:
        """The object's bytes; StoreError when it cannot be read or holds more than ``max_bytes``."""
        ...

    def create(self, name: str, data: bytes) -> None:
        """Write a new object; FileExistsError when the name is taken (nothing is overwritten), StoreError when
        the store cannot be written, :class:`WriteInDoubt` when it may have been written all the same."""
        ...

    def delete(self, names: Sequence[str]) -> list[str]:
        """Remove these objects (one that is already gone is no error); the names removed."""
        ...


def safe_name(name: str) -> str:
    """``name`` when it is a plain relative ``/``-separated path of ``[A-Za-z0-9._-]`` parts, none of them
    ``.`` or ``..``; StoreError otherwise (a store's names are written by anyone with access to it)."""
    if not _NAME.fullmatch(name) or any(part in (".", "..") for part in name.split("/")):
        raise StoreError(f"refusing the object name {name[:80]!r}: not a plain relative path")
    return name


def printable_url(url: str) -> str:
    """The URL without user info, query or fragment: what may be printed and recorded. Everything up to the
    last ``@`` after ``://`` goes, wherever a ``/``, ``?`` or ``#`` sits before it: a secret may hold any of them
    (AWS secret keys hold ``/``). Only Azure's ``abfs[s]://CONTAINER@ACCOUNT...`` keeps its container."""
    match = re.match(r"([a-zA-Z][a-zA-Z0-9+.-]*)://(.*)", url, re.DOTALL)
    if match is None:  # a path, or a mistyped URL (s3:KEY:SECRET@bucket): its user info goes all the same
        head = re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", url)
        text = (head.group(0) if head else "") + url.rsplit("@", 1)[1] if "@" in url else url
        return text.split("?", 1)[0].split("#", 1)[0]
    scheme, rest = match.groups()
    if "@" in rest and not is_azure_container(scheme, rest):
        rest = rest.rsplit("@", 1)[1]
    return f"{scheme}://{re.split(r'[?#]', rest, maxsplit=1)[0]}"


def is_azure_container(scheme: str, rest: str) -> bool:
    """Whether ``rest`` (what follows ``scheme://``) is Azure's ``CONTAINER@ACCOUNT...`` form: one ``@``, with no
    ``:``, ``/``, ``?`` or ``#`` before it (a user and password would hold a ``:``)."""
    head, at, _ = rest.partition("@")
    return scheme.lower() in ("abfs", "abfss") and bool(at) and bool(head) and rest.count("@") == 1 \
        and not any(c in head for c in ":/?#")


def read_all(store: HistoryStore, names: Sequence[str], max_bytes: int) -> Iterator[Read]:
    """Each object's name with its bytes or the StoreError reading it raised, in the order of ``names``, one at
    a time: nothing is read before it is asked for, and a store's batch (an object store's parallel requests,
    git's ``cat-file --batch``) holds a bounded number of objects at once, never the whole window."""
    batch = getattr(store, "read_many", None)
    if batch is not None:
        yield from batch(names, max_bytes)
        return
    for name in names:
        try:
            yield name, store.read(name, max_bytes)
        except StoreError as exc:
            yield name, exc


def create_once(store: HistoryStore, name: str, data: bytes) -> None:
    """Create ``name`` holding ``data``, and never leave the same bytes under a second name: after a create
    whose outcome is unknown (:class:`WriteInDoubt`) the name is read back; our bytes there mean it landed, an
    absent object means the same name is tried again (a few times). FileExistsError only when the name holds
    other bytes (the caller draws another name); the doubt itself when the read-back fails too (the store is
    still failing: no second name is drawn for what may have landed)."""
    doubt: WriteInDoubt | None = None
    for _ in range(CREATE_TRIES):
        try:
            store.create(name, data)
            return
        except FileExistsError:
            if doubt is not None and _holds(store, name, data, doubt):
                return  # an earlier try of ours landed
            raise  # someone else's object: the caller draws another name
        except WriteInDoubt as exc:
            doubt = exc
            if _holds(store, name, data, doubt):
                return
    assert doubt is not None
    raise doubt


def _holds(store: HistoryStore, name: str, data: bytes, doubt: WriteInDoubt) -> bool:
    try:
        return holds(store, name, data)
    except StoreError:
        raise doubt from None


def holds(store: HistoryStore, name: str, data: bytes) -> bool:
    """Whether the object ``name`` holds exactly ``data`` (False: absent, or other bytes); StoreError when it
    cannot be read. Read with a record's bound, not ours: a larger object there is someone else's, not an
    error."""
    try:
        return store.read(name, max(len(data), MAX_FILE_BYTES)) == data
    except NoSuchObject:
        return False


class DirectoryStore:
    """A folder on this machine (the default, ``.roofline/history``). Files at any depth are read (merged CI
    artifacts nest folders); a new file is written whole beside its name, then linked to it, which fails
    rather than replace a file of the same name."""

    remote = False

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.url = str(self.path)

    def __repr__(self) -> str:
        return f"DirectoryStore({self.url!r})"

    def entries(self, folder: str | None = None) -> list[Entry]:
        if not self.path.is_dir():
            return []
        base = self.path if folder is None else self.path / folder
        found = base.rglob("*.json") if folder is None else base.glob("*.json")
        entries = []
        for path in found:
            if path.name.startswith(".") or not path.is_file():
                continue
            try:
                info = path.stat()
            except OSError:
                continue  # pruned by another session since the listing
            entries.append(Entry(path.relative_to(self.path).as_posix(), info.st_size, info.st_mtime))
        return sorted(entries, key=lambda e: e.name)

    def file(self, name: str) -> Path:
        return self.path / name

    def read(self, name: str, max_bytes: int) -> bytes:
        try:
            return read_bytes(self.file(name), max_bytes)
        except FileNotFoundError:
            raise NoSuchObject(f"{self.file(name)}: no such file") from None
        except (OSError, ValueError) as exc:
            raise StoreError(f"{self.file(name)}: {getattr(exc, 'strerror', None) or exc}") from None

    def create(self, name: str, data: bytes) -> None:
        target = self.file(safe_name(name))
        try:
            write_bytes_new(target, data)
        except FileExistsError:
            if target.exists() or target.is_symlink():
                raise  # the name is taken: the caller draws another
            raise StoreError(f"{target}: a file is in the way of its folder") from None
        except OSError as exc:  # no room, no permission: the Protocol's error, naming the file
            raise StoreError(f"{target}: {exc.strerror or exc}") from None

    def delete(self, names: Sequence[str]) -> list[str]:
        removed = []
        root = self.path.resolve()
        for name in names:
            try:  # names come from this folder's own listing (any characters); never a path outside it
                path = self.file(name)
                if not path.resolve().is_relative_to(root) or ".." in Path(name).parts:
                    continue
                path.unlink()
                removed.append(name)
            except OSError:
                pass  # another session pruned it first, or a read-only copy: never an error
        return removed


def copy_sessions(source: HistoryStore, target: HistoryStore, max_bytes: int,
                  folder: str | None = None) -> tuple[list[str], list[str], list[str]]:
    """Copy every session object of ``source`` (one machine's ``folder``) that ``target`` lacks, create-only:
    the names copied, those already there, and ``name: why`` for each that could not be copied. The bytes
    are copied as they are: whoever reads them checks them (record.loader)."""
    entries = source.entries(folder=folder)
    # each lands as <machine key>/<file>, the layout the gate and retention read, whatever folders it was
    # nested in (a merged CI artifact); a file outside any machine-key folder has no place there
    placed = {e.name: f"{e.folder}/{e.name.rsplit('/', 1)[-1]}" for e in entries if MACHINE_KEY.fullmatch(e.folder)}
    failed = [f"{e.name}: not in a machine-key folder (<machine key>/<file>.json)" for e in entries
              if e.name not in placed]
    have = {e.name for e in target.entries(folder=folder)} if placed else set()
    todo = [n for n in placed if placed[n] not in have]
    copied, present = [], sorted(n for n in placed if placed[n] in have)
    for name, data in read_all(source, todo, max_bytes):
        try:
            if isinstance(data, StoreError):
                raise data
            create_once(target, safe_name(placed[name]), data)
            copied.append(name)
        except FileExistsError:
            present.append(name)
        except StoreError as exc:
            failed.append(f"{name}: {exc}")
    return copied, present, failed


