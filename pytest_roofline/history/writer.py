"""Write one history file per session (docs/history-format.md), atomically, under ``DIR/<machine key>/``."""

from __future__ import annotations

import os
from pathlib import Path

from pytest_roofline.errors import StoreError
from pytest_roofline.history.store import DirectoryStore, HistoryStore, create_once
from pytest_roofline.record.sessions import SessionRecord


def check_writable(directory: Path) -> None:
    """Raise ValueError naming the path when no history file could be written under ``directory`` at the end
    of the session: a file in its way, or a folder that cannot be written. Creates nothing (a session that runs
    no roofline test writes no history)."""
    existing = next((p for p in (directory, *directory.parents) if p.exists() or p.is_symlink()), None)
    blocker = next((p for p in (directory, *directory.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None or (existing is not None and not existing.exists()):  # a file, or a dangling link
        raise ValueError(f"{str(blocker or existing)!r} is not a directory")
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write in {str(existing)!r}: permission denied")


TRIES = 20  # names taken at once: 1 in 65536 for two sessions in one second on one commit


def write_history(store: Path | HistoryStore, record: SessionRecord) -> Path | str:
    """Create the session's object in the store (a directory: a temp file, then a link that never replaces);
    a taken name draws a new random part, so nothing is ever overwritten. A create that may have landed is
    read back before anything else is tried (:func:`~pytest_roofline.history.store.create_once`): a new name
    is drawn only when the name holds other bytes, so the site and retention never see one session twice.
    Returns where it went (a path, or the store's URL and the name, a string). StoreError when the store cannot
    be written."""
    target = DirectoryStore(store) if isinstance(store, Path) else store
    data = record.encode()
    for _ in range(TRIES):
        name = record.name()
        try:
            create_once(target, name, data)
        except FileExistsError:
            continue
        return target.file(name) if isinstance(target, DirectoryStore) else f"{target.url}/{name}"
    raise StoreError(f"{target.url}: {TRIES} names in a row were taken; nothing was written")
