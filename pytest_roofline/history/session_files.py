"""The files a finished session writes: its ``results.json`` (own folder, then the latest on top) and its
history entry (docs/history-format.md). One plain function for every mode that writes them (a plain session,
the pytest-xdist controller). No pytest here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_roofline.output.artifacts import results_document
from pytest_roofline.output.record import TestRecord
from pytest_roofline.output.results_dir import write_session
from pytest_roofline.output.session_output import MeasuredTest, test_result


def write_session_files(state: Any, records: Iterable[MeasuredTest | TestRecord], meta: Mapping[str, Any],
                        pytest_args: Sequence[str], *, root: Path | None = None, machine: Any = None) -> list[str]:
    """Write the session's ``results.json`` and its history file; return what could not be written, as lines
    for the terminal summary (empty when all went well). Never raises: a full disk must not hide the verdicts.

    ``state``: the session's ``measure.state.RooflineState`` (its settings, session id, machine and counter).
    ``records``: each test's record (``output.record.TestRecord``), or a ``TestEntry`` (anything
    ``session_output.MeasuredTest``) to make it from. ``meta``: the ``session`` block of
    ``results.json`` (``id``, ``start``, ``end``, ``exit_status``, ...). ``pytest_args``: the command line's
    arguments, for the history. ``root``: where to ask git for the commit (the rootdir; default: cwd).
    ``machine``: the ``Machine`` measured against (default: the state's; the xdist controller passes the
    workers', as it characterizes nothing itself).
    """
    errors: list[str] = []
    settings = state.settings
    machine = machine if machine is not None else state.loaded_machine
    try:
        tests = [test_result(r) for r in records]
        document = results_document(machine, [t.to_dict() for t in tests], {"session": dict(meta)})
    except Exception as exc:  # noqa: BLE001 - said in the summary; the verdicts stand
        return [f"roofline: could not build the results: {exc!r}"]
    try:
        write_session(settings.directory, state.session_id, document)
        state.results_written = True  # only now may the summary point at results.json as this run's
    except Exception as exc:  # noqa: BLE001 - a full disk, a removed folder: said in the summary
        errors.append(f"roofline: could not write the results under {str(settings.directory)!r}: "
                      f"{getattr(exc, 'strerror', None) or exc}{_drop_stale_top(settings.directory)}")
    if settings.history is not None:
        counter = (state.counter_label or "").removesuffix(" (auto)") or "+".join(
            sorted({t.counter for t in tests if t.counter})) or None
        errors += _write_history(state, document, meta, pytest_args, counter, machine, root)
    return errors


def _write_history(state: Any, document: Mapping[str, Any], meta: Mapping[str, Any], pytest_args: Sequence[str],
                   counter: str | None, machine: Any, root: Path | None) -> list[str]:
    """The history entry, then retention. A remote store that cannot be written keeps the entry under
    ``<--roofline-dir>/history-unsent/`` and sets ``state.history_unsent`` (the session fails: its history
    gate must not go green on a record the fleet never got)."""
    from pytest_roofline.history.location import as_store

    settings = state.settings
    history = settings.history
    store = as_store(history)
    try:
        path, entry = write_history_entry(store, document, meta, pytest_args, counter,
                                          machine_info=None if machine is None else dict(machine.info), root=root)
    except Exception as exc:  # noqa: BLE001 - the history is a record, never a reason to lose the verdicts
        if not store.remote:
            return [(f"roofline: could not write the history under {store.url!r}: "
                    f"{getattr(exc, 'strerror', None) or exc}")]
        state.history_unsent = True
        return [(f"roofline: could not write the history to {store.url}: {exc}; "
                f"{_keep_unsent(settings.directory, document, meta, pytest_args, counter, machine, root)}")]
    state.history_file = str(path)
    try:
        from pytest_roofline.history.retention import prune

        # the folder stays within --roofline-history-keep; each test keeps its baseline's sessions
        prune(store, settings.history_keep, protect=settings.baseline_sessions,
              folders=[str(entry["machine"]["key"])] if store.remote else None)
    except Exception as exc:  # noqa: BLE001 - retention is housekeeping: the session's entry is written
        return [f"roofline: history written, but retention could not prune {store.url}: {exc}"]
    return []


def _keep_unsent(directory: Path, document: Mapping[str, Any], meta: Mapping[str, Any], pytest_args: Sequence[str],
                 counter: str | None, machine: Any, root: Path | None) -> str:
    """Write the entry a store refused into a local folder, and say how to send it later."""
    unsent = directory / "history-unsent"
    try:
        path, _ = write_history_entry(unsent, document, meta, pytest_args, counter,
                                      machine_info=None if machine is None else dict(machine.info), root=root)
    except Exception as exc:  # noqa: BLE001
        return f"and it could not be kept locally either ({getattr(exc, 'strerror', None) or exc})"
    return (f"kept in {path}; send it with: python -m pytest_roofline history copy {unsent} <the store's URL>")


def _drop_stale_top(directory: Path) -> str:
    """This session wrote no results.json: the one on top is an earlier session's, and anything reading it
    (a CI step, a chart) would take it for this run's. Removed (its session folder keeps its own copy)."""
    from pytest_roofline.output.results_dir import RESULTS_FILE, session_dir

    top = directory / RESULTS_FILE
    try:
        top.unlink()
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"; the results.json there is an earlier session's and could not be removed ({exc.strerror or exc})"
    return (f"; the earlier session's {top} was removed so nothing takes it for this run's (its copy under "
            f"{session_dir(directory, '<session>').parent} stays)")


def write_history_entry(store: Path | Any, document: Mapping[str, Any], meta: Mapping[str, Any],
                        pytest_args: Sequence[str], counter: str | None, *,
                        machine_info: Mapping[str, Any] | None = None,
                        root: Path | None = None) -> tuple[Path | str, dict[str, Any]]:
    """Write the session's history entry into a directory or a ``history.store.HistoryStore``; where it went,
    and the entry."""
    from pytest_roofline.history.environment import git_state, versions
    from pytest_roofline.history.writer import history_document, write_history

    history = history_document(document, meta, git=git_state(root), versions=versions(dict(machine_info or {})),
                               pytest_args=pytest_args, counter=counter)
    return write_history(store, history), history
