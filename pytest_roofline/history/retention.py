"""How much history a machine keeps (``--roofline-history-keep``), and the pruning that enforces it.

A machine's folder keeps its newest N sessions (or those of the last N days). Each test's newest baseline
sessions are kept whatever their age, so a test run rarely (a nightly-only test, a partial run) never loses
the baseline it is judged against. Pruning starts only when a folder holds 10 % more than it keeps, so it
runs once every few sessions, not after each. The same for a directory and any other store. Each removal removes a
whole file or object: it is whole or gone, and a reader never sees half of one. Plain Python, cheap to import (the
option is parsed at configure time).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_roofline.errors import SettingError, StoreError
from pytest_roofline.history.reader import check_placement
from pytest_roofline.history.store import DirectoryStore, Entry, HistoryStore, read_all
from pytest_roofline.record.loader import MAX_CLOCK_SKEW_S, MAX_FILE_BYTES, parse_json, parse_start
from pytest_roofline.record.sessions import session_from

if TYPE_CHECKING:
    from pytest_roofline.record.sessions import Session

DEFAULT_KEEP = "200"
SLACK = 1.10  # prune once a folder holds this many times what it keeps


@dataclass(frozen=True)
class Keep:
    sessions: int | None = None  # the newest N sessions of each machine
    days: float | None = None  # the sessions of the last N days

    def describe(self) -> str:
        return f"the newest {self.sessions} sessions" if self.sessions else f"the last {self.days:g} days"


def parse_keep(value: object, where: str) -> Keep | None:
    """``N``, ``Nd`` or ``all`` (None: keep everything)."""
    text = str(value if value is not None else DEFAULT_KEEP).strip().lower() or DEFAULT_KEEP
    if text == "all":
        return None
    match = re.fullmatch(r"(\d+)\s*(d|days?)?", text)
    if match is None or int(match.group(1)) < 1:
        raise SettingError(f"{where} must be a number of sessions (200), of days (90d), or all; got {value!r}")
    number = int(match.group(1))
    return Keep(days=float(number)) if match.group(2) else Keep(sessions=number)


@dataclass(frozen=True)
class _Held:
    """One object of a machine's folder that parsed: the session it holds, when, and its measured tests."""

    name: str
    identity: tuple[str, str]  # (session id, start): copies of one session share it
    when: float
    nodeids: frozenset[str]


def _when(session: Session, entry: Entry, now: float) -> float:
    """The time retention orders a session by: its parsed start, or the store's own write time where that is
    later (a runner whose clock is behind is not pruned first). A write time beyond the clock's skew (a touched
    file) counts as now plus the skew, never as the far future."""
    start = parse_start(session.start).timestamp() if session.start else 0.0
    if entry.modified is None:
        return start
    return max(start, min(entry.modified, now + MAX_CLOCK_SKEW_S))


def _parse(entries: Sequence[Entry], store: HistoryStore, folder: str, now: float) -> tuple[list[_Held], int]:
    """The objects that parse as sessions of this folder's machine, and how many did not (those are never
    removed: retention cannot tell what they hold, nor whether they are someone's baseline)."""
    held: list[_Held] = []
    unparsed = 0
    by_name = {e.name: e for e in entries}
    for name, data in read_all(store, list(by_name), MAX_FILE_BYTES):
        try:
            if isinstance(data, Exception):
                raise data
            session = session_from(parse_json(data), name)
            check_placement(name, session)
        except (ValueError, StoreError):
            unparsed += 1
            continue
        measured = frozenset(n for n, record in session.tests.items() if record.fraction is not None)
        held.append(_Held(name, (session.id, session.start), _when(session, by_name[name], now), measured))
    return held, unparsed


def prune_folder(store: HistoryStore, folder: str, keep: Keep, protect: int, *,
                 now: float | None = None) -> list[str]:
    """Remove the sessions of one machine's folder beyond ``keep``, except each test's newest ``protect``
    sessions. Returns the names removed. Sessions are ordered by their parsed start (``_when``), never by an
    object's name; copies of one session count once; an object that does not parse is never removed."""
    clock = time.time() if now is None else now
    entries = store.entries(folder=folder)
    if keep.sessions is not None and len(entries) <= keep.sessions * SLACK:
        return []
    held, _ = _parse(entries, store, folder, clock)
    newest: dict[tuple[str, str], float] = {}
    for item in held:
        newest[item.identity] = max(newest.get(item.identity, item.when), item.when)
    order = sorted(newest, key=lambda identity: (newest[identity], identity))  # oldest first
    if keep.sessions is not None:
        beyond = set(order[:-keep.sessions]) if len(order) > keep.sessions else set()
    else:
        cutoff = clock - float(keep.days or 0) * 86400
        beyond = {identity for identity in order if newest[identity] < cutoff}
    if not beyond:
        return []
    seen: dict[str, int] = {}
    for identity in order:
        if identity not in beyond:
            for nodeid in frozenset().union(*(h.nodeids for h in held if h.identity == identity)):
                seen[nodeid] = seen.get(nodeid, 0) + 1
    doomed: list[str] = []
    for identity in reversed([i for i in order if i in beyond]):  # newest first: a test short of baseline keeps them
        copies = [h for h in held if h.identity == identity]
        nodeids = frozenset().union(*(h.nodeids for h in copies))
        if any(seen.get(n, 0) < protect for n in nodeids):
            for nodeid in nodeids:
                seen[nodeid] = seen.get(nodeid, 0) + 1
            continue
        doomed += [h.name for h in copies]
    return store.delete(doomed)


def prune_machine(folder: Path, keep: Keep, protect: int, *, now: float | None = None) -> list[Path]:
    """:func:`prune_folder` for a machine's folder of a history directory; the paths removed."""
    store = DirectoryStore(folder.parent)
    return [store.file(n) for n in prune_folder(store, folder.name, keep, protect, now=now)]


def prune(history: Path | HistoryStore, keep: Keep | None, protect: int, *,
          folders: Sequence[str] | None = None) -> list[str]:
    """Prune every machine folder of a history directory, or ``folders`` (a remote store: the session's own
    machine, so that a fleet's sessions do not each read every machine's). Best effort: what cannot be listed
    or removed stays."""
    if keep is None:
        return []
    store = DirectoryStore(history) if isinstance(history, Path) else history
    if folders is None:
        if not isinstance(store, DirectoryStore) or not store.path.is_dir():
            return []
        folders = sorted(p.name for p in store.path.iterdir() if p.is_dir())
    removed: list[str] = []
    for folder in folders:
        removed += prune_folder(store, folder, keep, protect)
    return removed
