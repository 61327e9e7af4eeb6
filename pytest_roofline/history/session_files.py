"""The files a finished session writes: its ``results.json`` (own folder, then the latest on top) and its
history entry (docs/history-format.md). One plain function for every mode that writes them (a plain session,
the pytest-xdist controller). No pytest here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_roofline.output.artifacts import results_document
from pytest_roofline.output.results_dir import write_session
from pytest_roofline.output.session_output import TestRecord, test_result


def write_session_files(state: Any, records: Iterable[TestRecord | Mapping[str, Any]], meta: Mapping[str, Any],
                        pytest_args: Sequence[str], *, root: Path | None = None, machine: Any = None) -> list[str]:
    """Write the session's ``results.json`` and its history file; return what could not be written, as lines
    for the terminal summary (empty when all went well). Never raises: a full disk must not hide the verdicts.

    ``state``: the session's ``measure.state.RooflineState`` (its settings, session id, machine and counter).
    ``records``: each test's record, a ``TestEntry`` (or anything ``session_output.TestRecord``) or an already
    made ``results.json`` test dict (as a pytest-xdist worker sends it). ``meta``: the ``session`` block of
    ``results.json`` (``id``, ``start``, ``end``, ``exit_status``, ...). ``pytest_args``: the command line's
    arguments, for the history. ``root``: where to ask git for the commit (the rootdir; default: cwd).
    ``machine``: the ``Machine`` measured against (default: the state's; the xdist controller passes the
    workers', as it characterizes nothing itself).
    """
    errors: list[str] = []
    settings = state.settings
    machine = machine if machine is not None else state.loaded_machine
    try:
        tests = [dict(r) if isinstance(r, Mapping) else test_result(r) for r in records]
        document = results_document(machine, tests, {"session": dict(meta)})
    except Exception as exc:  # noqa: BLE001 - said in the summary; the verdicts stand
        return [f"roofline: could not build the results: {exc!r}"]
    try:
        write_session(settings.directory, state.session_id, document)
        state.results_written = True  # only now may the summary point at results.json as this run's
    except Exception as exc:  # noqa: BLE001 - a full disk, a removed folder: said in the summary
        errors.append(f"roofline: could not write the results under {str(settings.directory)!r}: "
                      f"{getattr(exc, 'strerror', None) or exc}{_drop_stale_top(settings.directory)}")
    if settings.history is not None:
        try:
            counter = (state.counter_label or "").removesuffix(" (auto)") or "+".join(
                sorted({str(t["counter"]) for t in tests if t.get("counter")})) or None
            path = write_history_entry(settings.history, document, meta, pytest_args, counter,
                                       machine_info=None if machine is None else dict(machine.info), root=root)
            state.history_file = str(path)
            from pytest_roofline.history.retention import prune

            # the folder stays within --roofline-history-keep; each test keeps its baseline's sessions
            prune(settings.history, settings.history_keep, protect=settings.baseline_sessions)
        except Exception as exc:  # noqa: BLE001 - the history is a record, never a reason to lose the verdicts
            errors.append(f"roofline: could not write the history under {str(settings.history)!r}: "
                          f"{getattr(exc, 'strerror', None) or exc}")
    return errors


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


def write_history_entry(directory: Path, document: Mapping[str, Any], meta: Mapping[str, Any],
                        pytest_args: Sequence[str], counter: str | None, *,
                        machine_info: Mapping[str, Any] | None = None, root: Path | None = None) -> Path:
    from pytest_roofline.history.environment import git_state, versions
    from pytest_roofline.history.writer import history_document, write_history

    history = history_document(document, meta, git=git_state(root), versions=versions(dict(machine_info or {})),
                               pytest_args=pytest_args, counter=counter)
    return write_history(directory, history)
