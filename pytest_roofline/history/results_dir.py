"""The results directory (``--roofline-dir``): one complete record per session, the latest one on top.

    <dir>/results.json                        the latest finished session's record (replaced atomically)
    <dir>/sessions/<UTC time>-<pid>/          one folder per session: its results.json and its artifacts

Each session writes only inside its own folder, then replaces the top-level ``results.json`` with a copy
of its record, so concurrent sessions on one directory each keep a complete record, and no record points
at another session's files. Finished sessions beyond the newest ``KEEP_SESSIONS`` are removed, and so are
the folders of killed sessions (no results.json, their process gone) once they are old enough.
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from pytest_roofline._atomic import write_json_atomic
from pytest_roofline.errors import ResultsDirError
from pytest_roofline.model import Machine
from pytest_roofline.record.tests import SCHEMA

RESULTS_FILE = "results.json"
SESSIONS = "sessions"
KEEP_SESSIONS = 20
STALE_S = 3600.0  # a killed session's folder, its process gone, untouched this long: pruned with the rest
ABANDONED_S = 7 * 86400.0  # untouched this long, whatever its pid says (another host's, or a reused pid)


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


def write_session(directory: Path, session_id: str, document: Mapping[str, object]) -> Path:
    """Write the session's record in its own folder, then make it the latest; return the top-level path."""
    own = session_dir(directory, session_id)
    write_json_atomic(own / RESULTS_FILE, document)
    top = write_json_atomic(directory / RESULTS_FILE, document)
    prune_sessions(directory, keep=KEEP_SESSIONS, current=session_id)
    return top


def _pid_alive(pid: int) -> bool:
    if pid <= 0:  # 0 and negative numbers signal process groups, not one session
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True  # another user's process
    except (ProcessLookupError, OverflowError):
        return False
    return True


def is_abandoned(folder: Path, now: float | None = None) -> bool:
    """A session folder without a results.json that no session will finish: untouched for ``STALE_S`` and its
    process (the pid in its name) gone on this host, or untouched for ``ABANDONED_S`` (another host's, or a
    reused pid). A running session is never abandoned: it is alive, and it writes its folder."""
    if (folder / RESULTS_FILE).is_file():
        return False
    try:
        idle = (time.time() if now is None else now) - folder.stat().st_mtime
    except OSError:
        return False
    _, _, pid = folder.name.rpartition("-")
    gone = not pid.isdigit() or not _pid_alive(int(pid))
    return idle > ABANDONED_S or (idle > STALE_S and gone)


def prune_sessions(directory: Path, *, keep: int, current: str) -> list[Path]:
    """Remove finished sessions (those with a results.json) and abandoned ones (killed: see
    :func:`is_abandoned`) beyond the newest ``keep``; never a running one, never ``current``."""
    root = directory / SESSIONS
    try:
        done = sorted((p for p in root.iterdir() if p.is_dir() and not p.is_symlink()
                       and ((p / RESULTS_FILE).is_file() or is_abandoned(p))), key=lambda p: p.name)
    except OSError:
        return []
    removed = []
    for old in done[:-keep] if keep > 0 else done:
        if old.name != current:
            shutil.rmtree(old, ignore_errors=True)
            removed.append(old)
    return removed


def results_document(machine: Machine | None, tests: Iterable[Mapping[str, object]],
                     extra: Mapping[str, object] | None = None) -> dict[str, object]:
    """The ``results.json`` document of a session: its schema and units, the machine, ``extra`` (the session
    block) and the tests' records."""
    return {
        "schema": SCHEMA,
        "units": {"time": "s", "flops": "FLOP", "bytes": "byte", "ai": "FLOP/byte"},
        "machine": machine.to_dict() if machine is not None else None,
        **dict(extra or {}),
        "tests": list(tests),
    }
