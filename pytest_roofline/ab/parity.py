"""Collection parity: why a test this session collected has no twin at REF, decided before it is measured.

A test is ``new`` only with evidence: its file does not exist at REF, or REF's copy of the file was collected
without error and holds no such test. Anything else (a collection error at REF, a file REF has but collected
nothing from, a twin that stopped) is ``error``: not compared, and the test fails. Plain Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

LOG_LINES = 20


@dataclass(frozen=True)
class CollectError:
    """A collection error REF's twin reported: where (a node id or a path; empty: the whole run) and pytest's
    text."""

    nodeid: str
    message: str

    @classmethod
    def of(cls, value: object) -> CollectError | None:
        """The error as the twin sent it (``{"nodeid", "message"}``); None for anything else."""
        if not isinstance(value, Mapping):
            return None
        return cls(str(value.get("nodeid") or ""), str(value.get("message") or ""))


@dataclass(frozen=True)
class Missing:
    verdict: str  # "new" or "error"
    explanation: str


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def covers(error_nodeid: str, nodeid: str) -> bool:
    """Whether a collection error reported for ``error_nodeid`` (a directory, a file, a class) can hide
    ``nodeid``: the error's node is the test's or one of its parents."""
    if error_nodeid in ("", "."):
        return True
    if nodeid == error_nodeid or nodeid.startswith(error_nodeid + "::"):
        return True
    return nodeid.startswith(error_nodeid.rstrip("/") + "/")


def why_missing(nodeid: str, ref_nodeids: Iterable[str], errors: Iterable[CollectError], ref_rootdir: Path,
                ref_label: str) -> Missing:
    """Why REF's twin has no ``nodeid`` (it collected ``ref_nodeids``, with collection ``errors``, in
    ``ref_rootdir``)."""
    path = _file_of(nodeid)
    for error in errors:
        where = error.nodeid
        if covers(where, nodeid):
            message = error.message.strip()
            tail = "\n".join(message.splitlines()[-LOG_LINES:])
            return Missing("error", f"not compared: REF {ref_label} could not collect {where or 'its tests'}:\n"
                                    f"{tail}")
    if not (ref_rootdir / path).exists():
        return Missing("new", f"new: {path} does not exist at REF {ref_label}")
    if any(_file_of(other) == path for other in ref_nodeids):
        return Missing("new", f"new: REF {ref_label}'s {path} was collected and has no such test")
    return Missing("error", f"not compared: REF {ref_label} has {path} but its twin collected no test from it "
                            "(deselected there, or its collection differs: see the twin's log)")
