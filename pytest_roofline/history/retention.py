"""How much history a machine keeps (``--roofline-history-keep``), and the pruning that enforces it.

A machine's folder keeps its newest N sessions (or those of the last N days). Each test's newest baseline
sessions are kept whatever their age, so a test run rarely (a nightly-only test, a partial run) never loses
the baseline it is judged against. Pruning starts only when a folder holds 10 % more than it keeps, so it
runs once every few sessions, not after each. The same for a directory and any other store. Each removal removes a
whole file or object: it is whole or gone, and a reader never sees half of one. Plain Python, cheap to import (the
option is parsed at configure time).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_roofline.errors import SettingError
from pytest_roofline.history.store import DirectoryStore, Entry, HistoryStore, read_all
from pytest_roofline.history.validate import MAX_FILE_BYTES

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


def _nodeids(data: bytes | Exception) -> set[str]:
    if isinstance(data, Exception):
        return set()
    try:
        document = json.loads(data.decode("utf-8"))
        return {str(t["nodeid"]) for t in document.get("tests") or [] if isinstance(t, dict) and "nodeid" in t
                and isinstance(t.get("fraction"), (int, float))}
    except (ValueError, AttributeError, TypeError, RecursionError):
        return set()


_STAMP = re.compile(r"(\d{8}T\d{6}Z)-")


def _written(entry: Entry) -> float:
    """When the session was written: the store's time, else the UTC start its name begins with."""
    if entry.modified is not None:
        return entry.modified
    match = _STAMP.match(entry.name.rsplit("/", 1)[-1])
    if match is None:
        return time.time()  # a name of another form is never taken for old
    return _dt.datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=_dt.timezone.utc).timestamp()


def prune_folder(store: HistoryStore, folder: str, keep: Keep, protect: int, *,
                 now: float | None = None) -> list[str]:
    """Remove the sessions of one machine's folder beyond ``keep``, except each test's newest ``protect``
    sessions. Returns the names removed. Names start with the session's UTC start, so name order is time
    order."""
    entries = store.entries(folder=folder)
    if keep.sessions is not None:
        if len(entries) <= keep.sessions * SLACK:
            return []
        candidates = entries[:-keep.sessions]
    else:
        cutoff = (time.time() if now is None else now) - float(keep.days or 0) * 86400
        candidates = [e for e in entries if _written(e) < cutoff]
        if not candidates:
            return []
    gone = {e.name for e in candidates}
    kept = [e for e in entries if e.name not in gone]
    contents = dict(read_all(store, [e.name for e in entries], MAX_FILE_BYTES))
    ids = {name: _nodeids(data) for name, data in contents.items()}
    seen: dict[str, int] = {}
    for entry in kept:
        for nodeid in ids[entry.name]:
            seen[nodeid] = seen.get(nodeid, 0) + 1
    doomed = []
    for entry in reversed(candidates):  # newest first: they are the ones a test still short of baseline keeps
        if isinstance(contents[entry.name], Exception):
            continue  # not read (a network error): it may be a test's protected baseline, so it stays
        needed = [n for n in ids[entry.name] if seen.get(n, 0) < protect]
        if needed:
            for nodeid in ids[entry.name]:
                seen[nodeid] = seen.get(nodeid, 0) + 1
            continue
        doomed.append(entry.name)
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
