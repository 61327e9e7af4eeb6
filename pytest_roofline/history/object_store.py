"""A history in an object store: ``s3://BUCKET/PREFIX``, ``gs://BUCKET/PREFIX``, ``az://CONTAINER/PREFIX``,
through obstore (``pip install 'pytest-roofline[store]'``).

obstore was chosen over fsspec's s3fs/gcsfs/adlfs: one compiled wheel with no Python dependencies covers the
three clouds, each configured from its own standard environment and credential chain (``AWS_*`` with
``AWS_ENDPOINT_URL`` for S3-compatible servers, web identity and instance roles; ``GOOGLE_*``; ``AZURE_*``), and
its ``put(mode="create")`` is a conditional write (S3's ``If-None-Match: *``) on every backend, where s3fs's
exclusive mode depends on the botocore at hand. Nothing secret is ever an option value: credentials come from
the environment only, and :attr:`url` never holds them.
"""

from __future__ import annotations

import datetime as _dt
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from pytest_roofline.errors import StoreError, StoreSettingError
from pytest_roofline.history.store import (
    Entry,
    NoSuchObject,
    Read,
    WriteInDoubt,
    holds,
    is_azure_container,
    printable_url,
    safe_name,
)

if TYPE_CHECKING:
    from obstore.store import ObjectStore as _Store
    from obstore.store import RetryConfig

# A store that refuses connections fails within seconds (never hangs a CI job); a slow one gets 3 tries.
RETRY: RetryConfig = {"max_retries": 3, "retry_timeout": _dt.timedelta(seconds=20),
         "backoff": {"init_backoff": _dt.timedelta(milliseconds=100), "max_backoff": _dt.timedelta(seconds=2),
                     "base": 2.0}}
INSTALL = "pip install 'pytest-roofline[store]' (obstore)"
IN_FLIGHT = 16  # reads in flight at once: what read_many holds at most, whatever the window's length
# obstore's failures that prove nothing was written; any other (a timeout, a 5xx, a connection lost after the
# request was sent) leaves the outcome unknown
REFUSED = ("PermissionDeniedError", "UnauthenticatedError", "InvalidPathError", "NotSupportedError",
           "UnknownConfigurationKeyError")


class ObjectStore:
    """One bucket (or container) and prefix; every call is one request, or a few in parallel for a listing."""

    remote = True

    def __init__(self, store: _Store, url: str) -> None:
        self._store = store
        self.url = url

    def __repr__(self) -> str:
        return f"ObjectStore({self.url!r})"

    @classmethod
    def from_url(cls, url: str, *, where: str = "--roofline-history") -> ObjectStore:
        shown = printable_url(url)
        scheme, rest = url.split("://", 1)
        # any '@' is user info (a secret may hold '/', so it is looked for in the whole URL, not before the first
        # '/'), but abfs[s]://CONTAINER@ACCOUNT.dfs.core.windows.net/... names a container; a query holds SAS
        # tokens
        if "?" in url or "#" in url or ("@" in rest and not is_azure_container(scheme, rest)):
            raise StoreSettingError(f"{where}: {shown!r}: put credentials and options in the environment "
                                    "(AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL, GOOGLE_APPLICATION_CREDENTIALS, "
                                    "AZURE_STORAGE_ACCOUNT_KEY, ...), not in the URL")
        try:
            from obstore.store import from_url
        except ImportError:
            raise StoreSettingError(f"{where}: {shown!r} needs obstore: {INSTALL}") from None
        bucket = url.split("://", 1)[1].split("/", 1)[0]
        if not bucket:
            raise StoreSettingError(f"{where}: {shown!r} names no bucket; e.g. s3://my-bucket/roofline-history")
        try:
            store = from_url(url.rstrip("/"), retry_config=RETRY)
        except Exception as exc:  # noqa: BLE001 - obstore's configuration errors have several classes
            raise StoreSettingError(f"{where}: {shown!r}: {_first_line(exc)}") from None
        return cls(store, shown.rstrip("/"))

    def _fail(self, action: str, exc: BaseException) -> StoreError:
        return StoreError(f"{self.url}: cannot {action}: {type(exc).__name__}: {_first_line(exc)}")

    def entries(self, folder: str | None = None) -> list[Entry]:
        import obstore

        prefix = None if folder is None else f"{safe_name(folder)}/"
        try:
            found = obstore.list(self._store, prefix=prefix).collect()
        except Exception as exc:  # noqa: BLE001 - every obstore failure is one StoreError
            raise self._fail("list the history", exc) from None
        entries = []
        for meta in found:
            name = str(meta["path"])
            if not name.endswith(".json") or name.rsplit("/", 1)[-1].startswith("."):
                continue
            if folder is not None and "/" in name[len(prefix or ""):]:
                continue  # deeper than the machine's folder
            modified = meta.get("last_modified")
            entries.append(Entry(name, int(meta["size"]) if meta.get("size") is not None else None,
                                 modified.timestamp() if isinstance(modified, _dt.datetime) else None))
        return sorted(entries, key=lambda e: e.name)

    def read(self, name: str, max_bytes: int) -> bytes:
        import obstore

        try:
            # one byte past the limit tells a file too large apart without fetching all of it
            result = obstore.get(self._store, safe_name(name), options={"range": (0, max_bytes + 1)})
            data = bytes(result.bytes())
        except Exception as exc:  # noqa: BLE001
            if type(exc).__name__ == "NotFoundError":
                raise NoSuchObject(f"{self.url}/{name}: gone (pruned since the listing)") from None
            raise self._fail(f"read {name}", exc) from None
        if len(data) > max_bytes:
            raise StoreError(f"{self.url}/{name}: more than the {max_bytes} bytes a record file may have")
        return data

    def read_many(self, names: Sequence[str], max_bytes: int) -> Iterator[Read]:
        """Each object's name with its bytes, or the StoreError that reading it raised, in order; at most
        :data:`IN_FLIGHT` requests in flight and as many objects held, however many names there are."""
        def one(name: str) -> bytes | StoreError:
            try:
                return self.read(name, max_bytes)
            except StoreError as exc:
                return exc

        with ThreadPoolExecutor(max_workers=IN_FLIGHT) as pool:
            pending: deque[tuple[str, Future[bytes | StoreError]]] = deque()
            todo = iter(names)
            for name in todo:
                pending.append((name, pool.submit(one, name)))
                if len(pending) == IN_FLIGHT:
                    break
            while pending:
                name, future = pending.popleft()
                result = future.result()
                following = next(todo, None)
                if following is not None:  # one in, one out: the window stays IN_FLIGHT long
                    pending.append((following, pool.submit(one, following)))
                yield name, result

    def create(self, name: str, data: bytes) -> None:
        import obstore

        key = safe_name(name)
        try:
            obstore.put(self._store, key, data, mode="create")
        except Exception as exc:  # noqa: BLE001
            kind = type(exc).__name__
            if kind in ("AlreadyExistsError", "PreconditionError"):
                # obstore retries a request that timed out: the name may hold the bytes of our own first try
                try:
                    if holds(self, key, data):
                        return
                except StoreError as unread:  # ours or not, nobody can tell: no second name for it
                    raise WriteInDoubt(f"{self.url}/{name} exists and cannot be read back: {unread}") from None
                raise FileExistsError(f"{self.url}/{name}") from None
            if kind in REFUSED:
                raise self._fail(f"write {name}", exc) from None
            raise WriteInDoubt(str(self._fail(f"write {name}", exc))) from None

    def delete(self, names: Sequence[str]) -> list[str]:
        import obstore

        removed = []
        for name in names:
            try:
                obstore.delete(self._store, safe_name(name))
                removed.append(name)
            except Exception:  # noqa: BLE001,S112 - already gone, or no delete right: retention is best effort
                continue
        return removed


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
