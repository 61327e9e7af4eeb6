"""pytest-xdist glue: workers measure and send their records; the controller writes the session's files.

- Each worker measures its tests like a serial session (cores of its own, see ``host/cores.py``), writes its
  artifacts into the controller's session folder (the controller hands its session id to every worker), and at
  its ``pytest_sessionfinish`` puts its ``results.json`` records into ``config.workeroutput``.
- The controller collects them in ``pytest_testnodedown`` and writes one ``results.json`` for the session,
  the step summary and its terminal summary.
- On a machine with two or more NVIDIA GPUs each worker gets its own (``CUDA_VISIBLE_DEVICES``, set while
  pytest loads the first conftests, before anything can initialize CUDA; see ``host/gpus.py``).

The xdist hooks are marked optional, so this module needs no xdist import and loads without it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from pytest_roofline.model import Machine
from pytest_roofline.output.worker_records import OUTPUT_KEY, SESSION_KEY
from pytest_roofline.plugin.modes import MeasuringSession, file_targets, session_meta, took_written
from pytest_roofline.session.state import RooflineState

GPU_ASSIGNED = pytest.StashKey[str | None]()

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController

    from pytest_roofline.output.worker_records import MergedSession
    from pytest_roofline.plugin.rereport import Rereports
    from pytest_roofline.record.json_values import JsonObject


def assign_gpu_early(early_config: pytest.Config) -> None:
    """In an xdist worker under ``--roofline``: one GPU per worker (only with two or more GPUs, and only when
    ``CUDA_VISIBLE_DEVICES`` is unset). Called from ``pytest_load_initial_conftests``."""
    from pytest_roofline.host.gpus import assign_worker_gpu

    early_config.stash[GPU_ASSIGNED] = assign_worker_gpu()


class XdistWorker(MeasuringSession):
    """A pytest-xdist worker measures its own tests on its own cores and sends its records to the controller,
    which writes the session's files."""

    writes_results = False

    def __init__(self, state: RooflineState, config: pytest.Config) -> None:
        super().__init__(state)
        self.config = config
        # One session folder for the whole run: the controller's, so artifacts and results.json sit together.
        state.session_id = str(getattr(config, "workerinput", {}).get(SESSION_KEY) or state.session_id)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        super().pytest_sessionfinish(session)  # re-measures contended call sites; writes nothing
        state = self.state
        if not state.tests:
            return
        from pytest_roofline.host.gpus import assignment_note
        from pytest_roofline.output.worker_records import worker_payload

        failed_late = any(r.contended is not None and r.contended.failed_when_remeasured for r in self.records)
        machine = state.loaded_machine.to_dict() if state.loaded_machine is not None else None
        worker = str(getattr(self.config, "workerinput", {}).get("workerid")
                     or os.environ.get("PYTEST_XDIST_WORKER", "gw?"))
        try:
            payload = worker_payload(worker, [r.to_dict() for r in self.records], machine, failed_late,
                                     malloc=state.malloc, counter=state.counter_label,
                                     gpu=assignment_note(os.environ, self.config.stash.get(GPU_ASSIGNED, None)),
                                     fewer_cores={str(n): m.to_dict() for n, m in state.machines_by_cores.items()},
                                     baseline=state.baseline.describe() if state.baseline is not None else None,
                                     error=state.write_error, store_error=state.store_error)
        except Exception as exc:  # noqa: BLE001 - e.g. a record JSON cannot carry: said in results.json
            payload = {"worker": worker, "tests": [], "machine": machine, "failed_late": failed_late,
                       "error": f"could not send its records: {exc}"}
        session.config.workeroutput[OUTPUT_KEY] = payload  # type: ignore[attr-defined]


class XdistController:
    """The pytest-xdist controller runs no test: it gathers the workers' records and writes the session's
    ``results.json``, step summary and roofline summary."""

    def __init__(self, state: RooflineState) -> None:
        self.state = state
        self.payloads: list[JsonObject] = []  # as execnet delivered them: JSON
        self.merged: MergedSession | None = None
        self.collected: list[str] = []  # node ids in collection order, to list the tests as a serial run does
        self.rereports: Rereports | None = None  # set by pytest_configure

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: WorkerController) -> None:
        node.workerinput[SESSION_KEY] = self.state.session_id

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: WorkerController, ids: list[str]) -> None:
        if not self.collected:
            self.collected = list(ids)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: WorkerController, error: object | None) -> None:
        # A crashed worker has no workeroutput: its tests are reported by xdist; what it measured is lost.
        payload = (getattr(node, "workeroutput", None) or {}).get(OUTPUT_KEY)
        if isinstance(payload, dict):
            self.payloads.append(payload)
            if self.rereports is not None:  # tests the worker measured again: pytest reports them once more
                from pytest_roofline.plugin.modes import rereport
                from pytest_roofline.record.tests import TestRecord

                for record in payload.get("tests") or []:
                    rereport(self.rereports, TestRecord.from_dict(record))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.payloads:  # no worker measured anything (a worker sends records only when it did)
            return
        from pytest_roofline.output.worker_records import merge_payloads
        from pytest_roofline.plugin.ci_output import write_step_summary

        merged = self.merged = merge_payloads(self.payloads, self.collected)
        # a worker whose baseline store could not be read judged nothing against it: the run must not pass
        self.state.store_error = self.state.store_error or next(
            (str(p["store_error"]) for p in self.payloads if p.get("store_error")), None)
        if merged.failed_late and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # as a serial session does (see gate.py)
        machine = Machine.from_dict(merged.machine) if merged.machine else None  # the workers' machine
        self._write_results(session, merged, machine)
        from pytest_roofline.plugin.modes import fail_unsaved

        fail_unsaved(self.state, session)
        write_step_summary(self.state, merged.tests, machine, int(session.exitstatus))

    def _write_results(self, session: pytest.Session, merged: MergedSession, machine: Machine | None) -> None:
        from pytest_roofline.history.session_files import write_session_files

        state = self.state
        first = self.payloads[0] if self.payloads else {}
        meta = session_meta(state, session, str(first.get("malloc", state.malloc)))
        meta["workers"] = {name: worker.to_dict() for name, worker in merged.workers.items()}
        if len(merged.machines) > 1:
            meta["machines"] = list(merged.machines)  # workers saw different machines (GPUs of different models)
        errors = [f"{p.get('worker')}: {p['error']}" for p in self.payloads if p.get("error")]
        if errors:
            meta["worker_errors"] = errors
        from pytest_roofline.plugin.options import recorded_arguments

        written = took_written(state, write_session_files(
            file_targets(state), machine or state.loaded_machine, merged.tests, meta,
            recorded_arguments(session.config), counter_label=state.counter_label, root=session.config.rootpath))
        lines = [*([state.write_error] if state.write_error else []), *(f"roofline: worker {e}" for e in errors),
                 *written]
        state.write_error = "\n".join(lines) or None

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter, exitstatus: int,
                                config: pytest.Config) -> None:
        merged = self.merged
        if merged is None:
            return
        from pytest_roofline.plugin.modes import summary_context, write_summary

        try:
            machines = [Machine.from_dict(m) for m in merged.machines]
            fewer: dict[int, Machine] = {}
            for payload in self.payloads:  # every worker's roofs of fewer cores (the same machine: the same roofs)
                fewer.update({int(n): Machine.from_dict(m) for n, m in (payload.get("fewer_cores") or {}).items()})
            first = self.payloads[0]
            workers = ", ".join(f"{name} {info.tests}" for name, info in merged.workers.items())
            context = summary_context(self.state, config, terminalreporter, machines, fewer, first.get("counter"),
                                      first.get("baseline"))
        except Exception as exc:  # noqa: BLE001 - the summary must never turn a finished run into an internal error
            terminalreporter.write_line(f"roofline: could not write the summary: {exc!r}")
            return
        write_summary(terminalreporter, config, list(merged.tests), context,
                      (f"xdist: tests measured per worker: {workers}",))
