"""The files a finished session writes: its ``results.json`` (own folder, then the latest on top) and its
history entry (docs/history-format.md). One plain function for every mode that writes them (a plain session,
the pytest-xdist controller). No pytest here: the caller says where (:class:`Targets`) and is told what
happened (:class:`Written`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from pytest_roofline.history.environment import git_state, versions
from pytest_roofline.history.location import as_store
from pytest_roofline.history.results_dir import RESULTS_FILE, results_document, session_dir, write_session
from pytest_roofline.history.retention import prune
from pytest_roofline.history.store import HistoryStore
from pytest_roofline.history.writer import write_history
from pytest_roofline.record.json_values import JsonObject
from pytest_roofline.record.sessions import SessionInfo, SessionRecord
from pytest_roofline.record.tests import TestRecord

if TYPE_CHECKING:
    from pytest_roofline.history.retention import Keep
    from pytest_roofline.model import Machine


class SessionMeta(TypedDict, total=False):
    """The ``session`` block of ``results.json`` (docs/results.md); the history keeps what ``SessionInfo`` reads
    of it."""

    id: str
    directory: str  # the session's own folder under --roofline-dir
    start: str  # ISO times
    end: str
    exit_status: int
    interrupted: bool
    malloc: str
    compare: JsonObject  # REF and its commit, in an A/B session
    workers: dict[str, JsonObject]  # under xdist: per worker, its tests, GPU and machine
    machines: list[JsonObject]  # under xdist, where workers saw different machines
    worker_errors: list[str]


@dataclass(frozen=True)
class Targets:
    """Where a session's files go: ``--roofline-dir``, the session's folder name, ``--roofline-history``
    (None: off), what the history keeps, and the newest sessions of each test that retention never removes
    (the baseline's)."""

    directory: Path
    session_id: str
    history: Path | HistoryStore | None = None
    history_keep: Keep | None = None
    protect: int = 5


@dataclass
class Written:
    """What came of it: lines for the terminal summary (empty when all went well) and what was written."""

    errors: list[str] = field(default_factory=list)
    results_written: bool = False  # only then may the summary point at results.json as this run's
    history_file: str | None = None
    history_unsent: bool = False  # a remote store refused the entry (kept locally): the session must fail


def write_session_files(targets: Targets, machine: Machine | None, records: Iterable[TestRecord],
                        meta: SessionMeta, pytest_args: Sequence[str], *, counter_label: str | None = None,
                        root: Path | None = None) -> Written:
    """Write the session's ``results.json`` and its history file. Never raises: a full disk must not hide the
    verdicts.

    ``machine``: the ``Machine`` measured against (the xdist controller passes the workers', as it
    characterizes nothing itself). ``records``: each test's record, as built once when it
    finished (``plugin.ci_output.finish_record``). ``meta``: the ``session`` block of ``results.json``
    (``id``, ``start``, ``end``, ``exit_status``, ...). ``pytest_args``: the command line's arguments, for the
    history. ``counter_label``: the session's counter (``"analytic (auto)"``). ``root``: where to ask git for
    the commit (the rootdir; default: cwd).
    """
    written = Written()
    try:
        tests = list(records)
        document = results_document(machine, [t.to_dict() for t in tests], {"session": dict(meta)})
    except Exception as exc:  # noqa: BLE001 - said in the summary; the verdicts stand
        written.errors.append(f"roofline: could not build the results: {exc!r}")
        return written
    try:
        write_session(targets.directory, targets.session_id, document)
        written.results_written = True
    except Exception as exc:  # noqa: BLE001 - a full disk, a removed folder: said in the summary
        written.errors.append(f"roofline: could not write the results under {str(targets.directory)!r}: "
                              f"{getattr(exc, 'strerror', None) or exc}{_drop_stale_top(targets.directory)}")
    if targets.history is not None:
        counter = (counter_label or "").removesuffix(" (auto)") or "+".join(
            sorted({t.counter for t in tests if t.counter})) or None
        try:
            record = history_record(machine, tests, meta, pytest_args, counter, root=root)
        except Exception as exc:  # noqa: BLE001 - the history is a record, never a reason to lose the verdicts
            written.errors.append(f"roofline: could not build the history entry: {exc!r}")
        else:
            _write_history(targets, targets.history, record, written)
    return written


def history_record(machine: Machine | None, tests: Sequence[TestRecord], meta: SessionMeta,
                   pytest_args: Sequence[str], counter: str | None, *, root: Path | None = None) -> SessionRecord:
    """The session's history entry: its tests, the machine, and what only the history keeps (git, versions)."""
    info = dict(machine.info) if machine is not None else {}
    session = replace(SessionInfo.from_dict(meta), git=git_state(root), versions=versions(info),
                      pytest_args=tuple(str(a) for a in pytest_args), counter=counter)
    return SessionRecord.of_session(machine.to_dict() if machine is not None else None, tests, session)


def _write_history(targets: Targets, history: Path | HistoryStore, record: SessionRecord, written: Written) -> None:
    """The history entry, then retention. A remote store that cannot be written keeps the entry under
    ``<--roofline-dir>/history-unsent/`` and says the session must fail (its history gate must not go green
    on a record the fleet never got)."""
    store = as_store(history)
    try:
        written.history_file = str(write_history(store, record))
    except Exception as exc:  # noqa: BLE001 - the history is a record, never a reason to lose the verdicts
        if not store.remote:
            written.errors.append(f"roofline: could not write the history under {store.url!r}: "
                                  f"{getattr(exc, 'strerror', None) or exc}")
            return
        written.history_unsent = True
        written.errors.append(f"roofline: could not write the history to {store.url}: {exc}; "
                              f"{_keep_unsent(targets.directory, record)}")
        return
    try:
        # the folder stays within --roofline-history-keep; each test keeps its baseline's sessions
        prune(store, targets.history_keep, protect=targets.protect,
              folders=[record.machine_key] if store.remote else None)
    except Exception as exc:  # noqa: BLE001 - retention is housekeeping: the session's entry is written
        written.errors.append(f"roofline: history written, but retention could not prune {store.url}: {exc}")


def _keep_unsent(directory: Path, record: SessionRecord) -> str:
    """Write the entry a store refused into a local folder, and say how to send it later."""
    unsent = directory / "history-unsent"
    try:
        path = write_history(unsent, record)
    except Exception as exc:  # noqa: BLE001
        return f"and it could not be kept locally either ({getattr(exc, 'strerror', None) or exc})"
    return f"kept in {path}; send it with: python -m pytest_roofline history copy {unsent} <the store's URL>"


def _drop_stale_top(directory: Path) -> str:
    """This session wrote no results.json: the one on top is an earlier session's, and anything reading it
    (a CI step, a chart) would take it for this run's. Removed (its session folder keeps its own copy)."""
    top = directory / RESULTS_FILE
    try:
        top.unlink()
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"; the results.json there is an earlier session's and could not be removed ({exc.strerror or exc})"
    return (f"; the earlier session's {top} was removed so nothing takes it for this run's (its copy under "
            f"{session_dir(directory, '<session>').parent} stays)")
