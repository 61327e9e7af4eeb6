"""The results directory (``--roofline-dir``): one complete record per session, the latest one on top.

    <dir>/results.json                        the latest finished session's record (replaced atomically)
    <dir>/sessions/<UTC time>-<pid>/          one folder per session: its results.json and its artifacts

Each session writes only inside its own folder, then replaces the top-level ``results.json`` with a copy
of its record, so concurrent sessions on one directory each keep a complete record, and no record points
at another session's files. Finished sessions beyond the newest ``KEEP_SESSIONS`` are removed.
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_roofline._atomic import write_json_atomic
from pytest_roofline.errors import ResultsDirError

RESULTS_FILE = "results.json"
SESSIONS = "sessions"
KEEP_SESSIONS = 20


def new_session_id(now: _dt.datetime | None = None, pid: int | None = None) -> str:
    moment = (now or _dt.datetime.now(_dt.timezone.utc)).astimezone(_dt.timezone.utc)
    return f"{moment:%Y%m%dT%H%M%S}.{moment.microsecond // 1000:03d}Z-{pid or os.getpid()}"


def session_dir(directory: Path, session_id: str) -> Path:
    return directory / SESSIONS / session_id


def check_writable(directory: Path) -> None:
    """Fail early, naming the path, when results could not be written there at the end of the session."""
    blocker = next((p for p in (directory, *directory.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise ResultsDirError(f"{str(blocker)!r} is a file, not a directory")
    top = directory / RESULTS_FILE
    if top.is_dir():
        raise ResultsDirError(f"{str(top)!r} is a directory; results.json must be a file")
    try:
        (directory / SESSIONS).mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-check.", dir=directory / SESSIONS)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ResultsDirError(f"cannot write in {str(directory)!r}: {exc.strerror or exc}") from None


def write_session(directory: Path, session_id: str, document: Mapping[str, Any]) -> Path:
    """Write the session's record in its own folder, then make it the latest; return the top-level path."""
    own = session_dir(directory, session_id)
    write_json_atomic(own / RESULTS_FILE, document)
    top = write_json_atomic(directory / RESULTS_FILE, document)
    prune_sessions(directory, keep=KEEP_SESSIONS, current=session_id)
    return top


def prune_sessions(directory: Path, *, keep: int, current: str) -> list[Path]:
    """Remove finished sessions (those with a results.json) beyond the newest ``keep``; never a running one."""
    root = directory / SESSIONS
    try:
        finished = sorted((p for p in root.iterdir() if p.is_dir() and (p / RESULTS_FILE).is_file()),
                          key=lambda p: p.name)
    except OSError:
        return []
    removed = []
    for old in finished[:-keep] if keep > 0 else finished:
        if old.name != current:
            shutil.rmtree(old, ignore_errors=True)
            removed.append(old)
    return removed
