"""Atomic file writes: a reader never sees half a file, and a failed write leaves the old one intact."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path


def _synced_temp(target: Path, data: bytes) -> str:
    """A temp file beside ``target`` holding ``data``, flushed to disk, with the mode the umask gives."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            # mkstemp makes the file 0600; a file the user asked for follows the umask like any other, so CI
            # uploaders running as another user can read it.
            os.fchmod(handle.fileno(), 0o666 & ~current_umask())
            os.fsync(handle.fileno())
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    target = Path(path)
    tmp = _synced_temp(target, data)
    try:
        os.replace(tmp, target)
    except BaseException:
        _unlink(tmp)
        raise
    return target


def write_bytes_new(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write a file that must not exist yet: whole (a temp file, then a hard link to the name, which fails
    where a rename would replace), FileExistsError when the name is taken. On a file system without hard
    links, an exclusive create and then the bytes (a reader may then see the file before it is whole)."""
    target = Path(path)
    tmp = _synced_temp(target, data)
    try:
        os.link(tmp, target)
    except OSError as exc:
        if exc.errno == errno.EEXIST:
            raise FileExistsError(errno.EEXIST, "exists", str(target)) from None
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        with open(target, "xb") as handle:
            handle.write(data)
    finally:
        _unlink(tmp)
    return target


def current_umask() -> int:
    """The process's umask, read without changing it where /proc allows (os.umask can only set it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike[str], data: object) -> Path:
    return write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n")
