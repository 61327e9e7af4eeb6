"""Write one history file per session (docs/history-format.md), atomically, under ``DIR/<machine key>/``."""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_roofline.errors import StoreError
from pytest_roofline.history.machine_key import machine_key
from pytest_roofline.history.store import DirectoryStore, HistoryStore

FORMAT = "pytest-roofline-history"
SCHEMA = 1


def history_document(results: Mapping[str, Any], session: Mapping[str, Any], *, git: Mapping[str, Any],
                     versions: Mapping[str, Any], pytest_args: Sequence[str], counter: str | None) -> dict[str, Any]:
    """The history file of a session from its ``results.json`` document and what only the history keeps."""
    machine = results.get("machine")
    block = {"id": session.get("id"), "start": session.get("start"), "end": session.get("end"),
             "exit_status": session.get("exit_status"), "git": dict(git), "versions": dict(versions),
             "pytest_args": [str(a) for a in pytest_args], "counter": counter}
    machine_block = None
    if machine:
        from pytest_roofline.history.machine_key import fingerprint_of

        machine_block = {"key": machine_key(machine), "fingerprint": fingerprint_of(machine), **dict(machine)}
    else:
        machine_block = {"key": machine_key(None), "fingerprint": None, "name": None, "peak_flops": {},
                         "bandwidth": {}, "info": {}}
    return {"format": FORMAT, "schema": SCHEMA, "session": block, "machine": machine_block,
            "tests": list(results.get("tests") or [])}


def history_name(document: Mapping[str, Any]) -> str:
    """``<machine key>/<YYYYmmddTHHMMSSZ>-<commit 12 hex | nogit>-<4 random hex>.json``."""
    session = document["session"]
    try:
        start = _dt.datetime.fromisoformat(str(session.get("start")))
    except ValueError:
        start = _dt.datetime.now(_dt.timezone.utc)
    if start.tzinfo is None:
        start = start.replace(tzinfo=_dt.timezone.utc)
    commit = (session.get("git") or {}).get("commit")
    tag = str(commit)[:12] if commit else "nogit"
    return (f"{document['machine']['key']}/{start.astimezone(_dt.timezone.utc):%Y%m%dT%H%M%SZ}"
            f"-{tag}-{os.urandom(2).hex()}.json")


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


def encode(document: Mapping[str, Any]) -> bytes:
    return (json.dumps(document, indent=2, sort_keys=False, allow_nan=False) + "\n").encode("utf-8")


def write_history(store: Path | HistoryStore, document: Mapping[str, Any]) -> Path | str:
    """Create the session's object in the store (a directory: a temp file, then a link that never replaces);
    a taken name draws a new random part, so nothing is ever overwritten. Returns where it went (a path, or
    the store's URL and the name, a string). StoreError when the store cannot be written."""
    target = DirectoryStore(store) if isinstance(store, Path) else store
    data = encode(document)
    for _ in range(TRIES):
        name = history_name(document)
        try:
            target.create(name, data)
        except FileExistsError:
            continue
        return target.file(name) if isinstance(target, DirectoryStore) else f"{target.url}/{name}"
    raise StoreError(f"{target.url}: {TRIES} names in a row were taken; nothing was written")
