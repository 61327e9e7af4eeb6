"""The characterization cache: one JSON file per fingerprint, written atomically, guarded by a file lock.

A file is trusted only if it parses, carries our format tag, and its fingerprint equals the current one;
anything else (corrupt, truncated, from another machine or version) is replaced with a warning.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

from pytest_roofline._atomic import write_json_atomic
from pytest_roofline.errors import CacheWarning
from pytest_roofline.model import Machine
from pytest_roofline.record.loader import check_machine, read_json
from pytest_roofline.record.machine_key import Fingerprint

CACHE_FORMAT = "pytest-roofline-machine/1"
CACHE_ENV = "PYTEST_ROOFLINE_CACHE"

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; concurrent workers may then characterize twice
    fcntl = None  # type: ignore[assignment]


def default_cache_dir() -> Path:
    """``$PYTEST_ROOFLINE_CACHE``, else ``$XDG_CACHE_HOME/pytest-roofline`` (an absolute path, as the XDG spec
    requires), else ``~/.cache/pytest-roofline``."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "pytest-roofline"
    return Path.home() / ".cache" / "pytest-roofline"


STALE_TEMP_SECONDS = 600.0  # an atomic write or a compile finishes long before this


def remove_stale_temp_files(cache_dir: Path, now: float | None = None) -> list[Path]:
    """Remove temp files a killed session left behind: half-written cache records (``.*.tmp``) and
    half-built kernels (``build/.*.<pid>.tmp``) whose process is gone or that are older than
    ``STALE_TEMP_SECONDS``. Returns what was removed; never raises."""
    import time

    now = time.time() if now is None else now
    removed: list[Path] = []
    for folder in (cache_dir, cache_dir / "build"):
        try:
            candidates = list(folder.glob(".*.tmp"))
        except OSError:
            continue
        for path in candidates:
            try:
                old = now - path.stat().st_mtime > STALE_TEMP_SECONDS
                if old or _owner_gone(path):
                    path.unlink()
                    removed.append(path)
            except OSError:
                continue
    return removed


def _owner_gone(path: Path) -> bool:
    """A build temp file is named ``.<target>.<pid>.tmp``: true when that process no longer exists."""
    pid = path.name.rsplit(".", 2)[-2] if path.name.count(".") >= 3 else ""
    if not pid.isdigit() or len(pid) > 7 or int(pid) == os.getpid():  # mkstemp's 8-char names are not pids
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def cache_path(cache_dir: Path, device_kind: str, digest: str) -> Path:
    return cache_dir / f"machine-{device_kind}-{digest}.json"


def file_state(path: Path) -> tuple[int, int] | None:
    """(inode, mtime_ns) — tells whether another process replaced the file while we waited."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def read_cached(path: Path, expected_fingerprint: Fingerprint) -> Machine | None:
    """The cached machine if the file is ours and matches; None (with a warning if the file was bad)."""
    if not path.exists():
        return None
    problem = None
    try:
        data = read_json(path)  # bounded in size and depth, as every file read back
        problem = _problem_with(data, expected_fingerprint)
        if problem is None and isinstance(data, dict):
            check_machine(data["machine"])  # roofs positive and finite, before anything divides by them
            return Machine.from_dict(data["machine"])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        problem = f"unreadable ({type(error).__name__}: {error})"
    except (KeyError, TypeError, ValueError) as error:
        problem = f"invalid machine record ({type(error).__name__}: {error})"
    warnings.warn(f"pytest-roofline: ignoring cache file {path}: {problem}; re-characterizing and replacing it",
                  CacheWarning, stacklevel=3)
    return None


def _problem_with(data: object, expected_fingerprint: Fingerprint) -> str | None:
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("format") != CACHE_FORMAT:
        return f"foreign format {data.get('format')!r} (expected {CACHE_FORMAT!r})"
    found = data.get("fingerprint")
    if found != json.loads(json.dumps(expected_fingerprint)):
        if isinstance(found, dict):
            differing = sorted(k for k in set(found) | set(expected_fingerprint)
                               if found.get(k) != expected_fingerprint.get(k))
            return f"fingerprint belongs to another machine or version (differs in: {', '.join(differing)})"
        return "no fingerprint"
    if not isinstance(data.get("machine"), dict):
        return "no machine record"
    return None


def write_cached(path: Path, fingerprint_fields: Fingerprint, machine: Machine) -> None:
    write_json_atomic(path, {"format": CACHE_FORMAT, "fingerprint": fingerprint_fields,
                             "machine": machine.to_dict()})


def lockable(lock_path: Path) -> OSError | None:
    """None when this process can create and open the lock file (the cache folder takes writes); else the
    error (a read-only folder or file system), so the caller can read the cache and measure elsewhere."""
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644))
    except OSError as exc:
        return exc
    return None


@contextlib.contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[None]:
    """Block until this process holds the lock file; released on exit (also when the process dies)."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+b") as handle:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
