"""Which store a history location names: ``--roofline-history``, ``--roofline-baseline`` and every CLI's
HISTORY take a local path, ``file://DIR``, an object store's URL or ``git:BRANCH`` (``history.store``)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pytest_roofline.errors import StoreSettingError
from pytest_roofline.history.object_store import ObjectStore
from pytest_roofline.history.store import DirectoryStore, HistoryStore, is_azure_container, printable_url

OBJECT_SCHEMES = ("s3", "s3a", "gs", "az", "azure", "abfs", "abfss")
# schemes whose 'SCHEME:' without '//' is a mistyped URL, never a folder of that name: 's3:/b/p' would otherwise
# be written to ./s3:/b/p and the fleet's store would never hear of it
URL_SCHEMES = (*OBJECT_SCHEMES, "file", "http", "https", "ftp", "ssh")
ACCEPTED = ("a directory (.roofline/history), file://DIR, s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, "
            "az://CONTAINER/PREFIX, or git:BRANCH (a branch of this repository's origin)")


def is_location_url(text: str) -> bool:
    """Whether the text names a store by URL (``scheme://`` or ``git:``), not a local path."""
    return bool(re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*://", text)) or text.startswith("git:")


def open_store(location: str | os.PathLike[str], *, where: str = "--roofline-history",
               root: Path | None = None) -> HistoryStore:
    """The store a history location names (see :data:`ACCEPTED`). ``where``: the option or argument, for the
    message; ``root``: the repository a ``git:`` store belongs to (default: the current directory). Nothing is
    contacted here: a store is reached at its first use."""
    text = os.fspath(location)
    if not isinstance(text, str):
        raise StoreSettingError(f"{where}: not a path or URL: {text!r}")
    text = text.strip()
    if not text:
        raise StoreSettingError(f"{where}: empty; accepted: {ACCEPTED}")
    if text.startswith("git:") and not text.startswith("git://"):
        from pytest_roofline.history.git_store import GitBranchStore

        return GitBranchStore.from_location(text, where=where, root=root)
    match = re.match(r"([a-zA-Z][a-zA-Z0-9+.-]*)://", text)
    if match is None:
        mistyped = re.match(r"([a-zA-Z][a-zA-Z0-9+.-]*):", text)
        if mistyped is not None and mistyped.group(1).lower() in URL_SCHEMES:
            scheme = mistyped.group(1).lower()
            # the text is not printed: what follows the scheme may hold a credential
            raise StoreSettingError(f"{where}: a location starting with {scheme + ':'!r} but not {scheme + '://'!r} "
                                    f"is neither a URL nor a folder; accepted: {ACCEPTED}")
        return DirectoryStore(Path(text))
    scheme = match.group(1).lower()
    rest = text[match.end():]
    if "@" in rest and scheme in (*OBJECT_SCHEMES, "file") and not is_azure_container(scheme, rest):
        # user info, whatever the scheme and wherever a '/' of a secret puts its '@'
        raise StoreSettingError(f"{where}: {printable_url(text)!r}: a history URL takes no user or password; put "
                                "credentials in the environment (AWS_ACCESS_KEY_ID, GOOGLE_APPLICATION_CREDENTIALS, "
                                "AZURE_STORAGE_ACCOUNT_KEY, ...), not in the URL")
    if scheme == "file":
        return DirectoryStore(Path(rest or "."))
    if scheme in OBJECT_SCHEMES:
        return ObjectStore.from_url(text, where=where)
    raise StoreSettingError(f"{where}: {printable_url(text)!r}: the scheme {scheme!r} is not a history store; "
                            f"accepted: {ACCEPTED}")


def as_store(location: HistoryStore | str | os.PathLike[str], *, where: str = "--roofline-history",
             root: Path | None = None) -> HistoryStore:
    """A store as it is, or the store a path or URL names."""
    if isinstance(location, HistoryStore):
        return location
    return open_store(location, where=where, root=root)


def cli_location(text: str, command: str, *, must_exist: bool = True) -> Path | HistoryStore:
    """A CLI's HISTORY argument: a Path (a directory or one file) or a store. StoreSettingError naming the
    command when it is neither, or a local path that does not exist."""
    if is_location_url(text):
        return open_store(text, where=f"{command}: HISTORY")
    path = Path(text)
    if must_exist and not path.exists():
        raise StoreSettingError(f"{command}: {text}: no such file or directory")
    return path
