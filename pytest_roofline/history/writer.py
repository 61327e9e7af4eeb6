"""Write one history file per session (docs/history-format.md), atomically, under ``DIR/<machine key>/``."""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_roofline._atomic import write_json_atomic
from pytest_roofline.history.machine_key import machine_key

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


def history_path(directory: Path, document: Mapping[str, Any]) -> Path:
    """``DIR/<machine key>/<YYYYmmddTHHMMSSZ>-<commit 12 hex | nogit>-<4 random hex>.json``."""
    session = document["session"]
    try:
        start = _dt.datetime.fromisoformat(str(session.get("start")))
    except ValueError:
        start = _dt.datetime.now(_dt.timezone.utc)
    if start.tzinfo is None:
        start = start.replace(tzinfo=_dt.timezone.utc)
    commit = (session.get("git") or {}).get("commit")
    tag = str(commit)[:12] if commit else "nogit"
    name = f"{start.astimezone(_dt.timezone.utc):%Y%m%dT%H%M%SZ}-{tag}-{os.urandom(2).hex()}.json"
    return directory / str(document["machine"]["key"]) / name


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


def write_history(directory: Path, document: Mapping[str, Any]) -> Path:
    """Write the file (a temp file in the same folder, then a rename); a new random suffix never overwrites."""
    path = history_path(directory, document)
    while path.exists():  # two sessions in one second on one commit: 1 in 65536, but never overwrite
        path = history_path(directory, document)
    return write_json_atomic(path, document)
