"""One plugin object per mode of a pytest process; ``pytest_configure`` registers exactly one.

- :class:`Passive`: no ``--roofline``. The ``roofline`` fixture calls the measured function and nothing else.
- :class:`ProfiledChild`: the child process the ncu counter profiles (``PYTEST_ROOFLINE_NCU_CHILD=1``). The
  fixture only marks NVTX ranges; nothing is judged or written.
- :class:`MeasuringSession`: ``--roofline`` in a plain run: measure, gate, write results, print the summary.
- :class:`~pytest_roofline.plugin.xdist.XdistWorker`: the same inside a pytest-xdist worker; it sends its
  records to the controller.
- :class:`~pytest_roofline.plugin.xdist.XdistController`: the pytest-xdist controller: it runs no test; it
  writes the session's files from the workers' records.

Each mode carries only the hooks it needs, so no hook asks which mode it is in.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import pytest

from pytest_roofline.fixture_types import RooflineFixture
from pytest_roofline.plugin.keys import ENTRY, STATE, TEARDOWN_ERROR
from pytest_roofline.plugin.markers import marker_options, wants_roofline
from pytest_roofline.record.tests import Params, TestRecord
from pytest_roofline.session.state import RooflineState, TestEntry

if TYPE_CHECKING:
    from pytest_roofline.history.session_files import SessionMeta, Targets, Written
    from pytest_roofline.history.store import HistoryStore
    from pytest_roofline.model import Machine
    from pytest_roofline.output.summary import SummaryContext
    from pytest_roofline.plugin.rereport import Rereports


class Passive:
    """Without ``--roofline``: ``roofline.measure(fn, *args)`` returns ``fn(*args)`` and records nothing."""

    def __init__(self, state: RooflineState) -> None:
        self.state = state

    @pytest.fixture
    def roofline(self, request: pytest.FixtureRequest) -> RooflineFixture:
        """Measure a callable: ``y = roofline.measure(fn, *args, **kwargs)`` returns ``fn(*args, **kwargs)``."""
        from pytest_roofline.measure.regions import Recorder

        state = self.state
        return Recorder(enabled=False, machine=state.machine, counter=state.counter,
                        policy=state.settings.timing_policy())


class ProfiledChild:
    """Inside the ncu-profiled child: mark NVTX ranges around one call of each measured function. A batched
    child (many tests in one ncu run) also writes each test's start and outcome to its progress file."""

    def __init__(self) -> None:
        from pytest_roofline.counters.ncu.child import BatchProgress

        self.progress = BatchProgress.from_env()

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        if self.progress is not None:
            self.progress.start(nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.progress is not None and report.failed:
            self.progress.failed = True

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        if self.progress is not None:
            self.progress.finish(nodeid)

    @pytest.fixture
    def roofline(self) -> RooflineFixture:
        """Measure a callable: ``y = roofline.measure(fn, *args, **kwargs)`` returns ``fn(*args, **kwargs)``."""
        from pytest_roofline.counters.ncu.child import RANGE_PREFIX, ChildRecorder

        return ChildRecorder(self.progress.prefix() if self.progress is not None else RANGE_PREFIX)


class MeasuringSession:
    """``--roofline``: characterize before the first test, measure and gate each test, write the results."""

    writes_results = True

    def __init__(self, state: RooflineState) -> None:
        self.state = state
        self.rereports: Rereports | None = None  # set where pytest reports from (not a worker)
        self.records: list[TestRecord] = []  # the results.json records every output renders

    # -- before the tests -------------------------------------------------------------------------------------

    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        state = self.state
        if config.option.collectonly or not any(wants_roofline(item) for item in items):
            return
        if state.settings.counter == "ncu":  # say what is missing before any test runs
            from pytest_roofline.errors import NcuUnavailable

            try:
                state.choose_counter()
            except NcuUnavailable as exc:
                raise pytest.UsageError(str(exc)) from None
        # Characterize (or load the pinned machine) before any test runs, outside output capture.
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        from pytest_roofline.output.progress import for_reporter

        progress = for_reporter(reporter) if reporter is not None else None  # one updating line on a terminal
        try:
            state.machine(progress=progress)
        except (OSError, ValueError) as exc:
            raise pytest.UsageError(f"roofline: cannot get machine ceilings: {exc}") from None
        finally:
            if progress is not None:
                progress.finish()
        state.pin_worker()  # an xdist worker stays on its own cores from here on
        fallback = None
        if state.settings.compare:
            from pytest_roofline.ab.plugin.session import resolve_last_night

            fallback = resolve_last_night(state, config)
        if (state.settings.baseline is not None or fallback is not None) and state.baseline is None:
            _load_baseline(state, config, fallback)
            _warn_unmatched(state, [item.nodeid for item in items if wants_roofline(item)])

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.state.unpin_worker()

    # -- each test --------------------------------------------------------------------------------------------

    @pytest.fixture
    def roofline(self, request: pytest.FixtureRequest) -> RooflineFixture:
        """Measure a callable: ``y = roofline.measure(fn, *args, **kwargs)`` returns ``fn(*args, **kwargs)``."""
        from pytest_roofline.measure.regions import Recorder

        state = self.state
        options = marker_options(request.node) if isinstance(request.node, pytest.Item) else None
        identity = _identity(request.node)  # read from the item before the recorder exists: one way
        recorder = Recorder(enabled=True, machine=state.machine, counter=state.counter,
                            policy=state.settings.timing_policy())
        recorder.cores = state.core_planner()  # cores of its own, judged against roofs for that many cores
        recorder.machine_for_cores = lambda count: state.machine_for_cores(count, _core_roofs_progress(request))
        recorder.machine_for_device = lambda device, count: state.machine_for_device(
            device, count, _core_roofs_progress(request, "the CPU's roofs, for host code in a CUDA session"))
        recorder.probe_mode = state.settings.probe
        recorder.probe_cache = state.probe_cache
        recorder.gpu_l2 = state.settings.gpu_l2
        recorder.l2_flushes = state.l2_flushes
        recorder.ops_mode = state.settings.ops
        if state.compare_link is not None:  # --roofline-compare: each call site takes turns with REF's twins
            from pytest_roofline.ab.reach import TestReach
            from pytest_roofline.ab.site_timer import PairedSites
            from pytest_roofline.ab.verdict import compare_band

            if isinstance(state.compare_link, TestReach):  # the only link ab.plugin.session keeps there
                recorder.site_timer = PairedSites(state.compare_link, compare_band(state, options))
        entry = TestEntry(request.node.nodeid, options.min_fraction if options else None, recorder, options=options)
        entry.extra.update(identity)
        request.node.stash[ENTRY] = entry
        state.tests[entry.nodeid] = entry
        return recorder

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        entry = item.stash.get(ENTRY, None)
        try:
            result = yield  # a test that raised is not judged: its own failure says more
        except BaseException:
            if entry is not None:
                entry.recorder.release_pending()
            raise
        if entry is not None and entry.recorder.pending:
            try:
                if not self._judge_pending(item, entry):
                    return result
            finally:
                entry.recorder.release_pending()
        if item.get_closest_marker("roofline") is None:
            return result
        if entry is None or not entry.recorder.regions:
            from pytest_roofline.errors import RooflineWarning

            item.warn(RooflineWarning("test is marked roofline but measured nothing: call "
                                      "roofline.measure(fn, *args) through the `roofline` fixture"))
            return result
        from pytest_roofline.gates.judge import CompareJudge, judge, keep

        compare: CompareJudge | None = None
        if self.state.compare_ref is not None:  # the A/B gate, imported only in an A/B session
            from pytest_roofline.ab.verdict import judge_compare

            compare = judge_compare
        measured = entry.recorder.measured()  # read once: what the gates judge
        outcome = judge(self.state, entry, measured, entry.options,
                        xfail=item.get_closest_marker("xfail") is not None, compare=compare)
        keep(entry, outcome)
        if outcome.warning is not None:
            from pytest_roofline.errors import RooflineWarning

            item.warn(RooflineWarning(outcome.warning))
        from pytest_roofline.output.summary import fit_message

        if outcome.error is not None:
            item.stash[TEARDOWN_ERROR] = fit_message(outcome.error)  # raised in teardown: an error, never a pass
        elif outcome.failure is not None:
            pytest.fail(fit_message(outcome.failure), pytrace=False)
        return result

    def _judge_pending(self, item: pytest.Item, entry: TestEntry) -> bool:
        """Count the test's ncu-pending regions; False when the test is not to be judged (an error waits)."""
        from pytest_roofline.session.ncu_fallback import ChildRun, judge_pending

        config = item.config
        from pytest_roofline.plugin.ncu_batch import batch_candidates, ncu_full

        child = ChildRun(config.rootpath, config.inipath, config.pluginmanager.has_plugin("xdist"),
                         batch_candidates(item), ncu_full(config))
        outcome = judge_pending(self.state, entry, item.nodeid, child, item.warn)
        if outcome.skip is not None:
            pytest.skip(outcome.skip)
        if outcome.fail is not None:
            pytest.fail(outcome.fail, pytrace=False)
        if outcome.error is not None:
            item.stash[TEARDOWN_ERROR] = outcome.error
            return False
        return True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
        result = yield
        entry = item.stash.get(ENTRY, None)
        if entry is not None and entry.recorder is not None:
            entry.recorder.calls.clear()  # the gate has decided: let the test's tensors go (contended ones stay)
        message = item.stash.get(TEARDOWN_ERROR, None)
        if message is not None:
            del item.stash[TEARDOWN_ERROR]
            pytest.fail(message, pytrace=False)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        entry = item.stash.get(ENTRY, None)
        report = yield
        if call.when == "call" and item.stash.get(TEARDOWN_ERROR, None) is not None:
            from pytest_roofline.plugin.rereport import ERROR_PENDING

            setattr(report, ERROR_PENDING, True)  # counted once, as the error its teardown reports
        if entry is not None and report.failed and "failure" not in entry.extra:
            entry.extra["failure"] = failure_of(report)  # the first one: a teardown error after it says less
        if entry is not None and (report.when == "call" or report.failed):
            if hasattr(report, "wasxfail"):
                entry.outcome = "xfailed" if report.skipped else "xpassed"
            elif report.when != "call":
                entry.outcome = "error" if report.failed else entry.outcome
            else:
                entry.outcome = report.outcome
        if entry is not None and report.when == "teardown":
            from pytest_roofline.plugin.ci_output import finish_record

            finish_record(item, report, entry)  # the test is done: its record, once
        return report

    # -- after the tests --------------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)  # before --junitxml writes its file and xdist's worker says it finished
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        state = self.state
        if not state.tests:
            return
        from pytest_roofline.gates.judge import remeasure_contended
        from pytest_roofline.plugin.ci_output import record_of

        remeasured = remeasure_contended(state)
        if any(r.failure for r in remeasured):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        from pytest_roofline.output.summary import fit_message

        for done in remeasured:
            if done.failure:  # kept for the xdist controller to report
                done.entry.extra["contended"]["message"] = fit_message(done.failure)
        try:  # a test measured again has no record left: it gets a new one
            self.records = [entry.record or record_of(entry) for entry in state.tests.values()]
        except Exception as exc:  # noqa: BLE001 - never raise at the end of a run: said in the summary
            state.write_error = f"roofline: could not build the results: {exc!r}"
            if self.writes_results:
                fail_unsaved(state, session)
            return
        if self.rereports is not None:
            for record in self.records:
                rereport(self.rereports, record)
        if self.writes_results:
            self._write_results(session)
            fail_unsaved(state, session)
            from pytest_roofline.plugin.ci_output import write_step_summary

            write_step_summary(state, self.records, state.loaded_machine, int(session.exitstatus))

    def _write_results(self, session: pytest.Session) -> None:
        from pytest_roofline.history.session_files import write_session_files
        from pytest_roofline.plugin.options import recorded_arguments

        state = self.state
        written = write_session_files(file_targets(state), state.loaded_machine, self.records,
                                      session_meta(state, session, state.malloc),
                                      recorded_arguments(session.config), counter_label=state.counter_label,
                                      root=session.config.rootpath)
        errors = took_written(state, written)
        state.write_error = "\n".join([*([state.write_error] if state.write_error else []), *errors]) or None

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter, exitstatus: int,
                                config: pytest.Config) -> None:
        state = self.state
        if not self.records:
            if state.write_error:
                terminalreporter.write_line(state.write_error, red=True, bold=True)
            return
        machines = [m for m in (state.loaded_machine, state.host_machine) if m is not None]
        write_summary(terminalreporter, config, self.records, summary_context(
            state, config, terminalreporter, machines, state.machines_by_cores,
            state.counter_label, state.baseline.describe() if state.baseline is not None else None))


FAILURE_CHARS = 2000  # of a failure's message kept in results.json: its cause, not a whole traceback


class Failure(TypedDict):
    """A failed test's ``failure`` field (docs/results.md)."""

    when: str  # setup, call or teardown
    message: str
    where: str | None  # file:line it was raised at; None for the plugin's own gate failures


class Identity(TypedDict):
    """Where a test sits among the variants of one parametrized test."""

    params: Params
    function: str


def failure_of(report: pytest.TestReport) -> Failure:
    """``{"when", "message", "where"}`` of a failed report, for the test's record: the exception's own line (or
    the failure's text) and the file and line it was raised at, so a run's log is not needed to know why."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = str(getattr(crash, "message", "") or report.longreprtext or "").strip()
    message = message.removeprefix("Failed: ")  # pytest.fail's own type: the text is the cause
    path = str(getattr(crash, "path", "") or "")
    # the plugin's own failures (a gate's, raised from its hooks) say their cause; their line in it would not
    line = getattr(crash, "lineno", None)
    where = f"{path}:{line}" if path and not path.startswith(str(Path(__file__).parents[1])) else None
    if len(message) > FAILURE_CHARS:
        message = message[:FAILURE_CHARS] + " ..."
    return {"when": report.when, "message": message, "where": where}


def fail_unsaved(state: RooflineState, session: pytest.Session) -> None:
    """A run whose results.json could not be written exits 1 even when every test passed, and says so: a CI
    job must not go green on a run that left no record (or only an earlier run's). So does one whose baseline
    store could not be read (its gate would have passed blind) or whose remote history store refused its
    entry (kept locally). A local history that could not be written is said in the summary; the run's own
    record stands."""
    line = None
    if not state.results_written:
        line = "roofline: exit status 1: the tests passed, but this run's results were not saved"
    elif state.store_error:
        line = f"roofline: exit status 1: {state.store_error}; the tests were not compared with it"
    elif state.history_unsent:
        line = "roofline: exit status 1: the tests passed, but the history store did not get this session"
    if line is not None and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        state.write_error = f"{state.write_error}\n{line}" if state.write_error else line


def file_targets(state: RooflineState) -> Targets:
    """Where this session's results.json and history entry go."""
    from pytest_roofline.history.session_files import Targets

    settings = state.settings
    return Targets(directory=settings.directory, session_id=state.session_id, history=settings.history,
                   history_keep=settings.history_keep, protect=settings.baseline_sessions)


def took_written(state: RooflineState, written: Written) -> list[str]:
    """What the summary needs of what was written; the lines to show."""
    state.results_written = written.results_written
    state.history_file = written.history_file
    state.history_unsent = written.history_unsent
    return written.errors


def summary_context(state: RooflineState, config: pytest.Config, terminalreporter: pytest.TerminalReporter,
                    machines: Sequence[Machine], fewer_cores: Mapping[int, Machine] | None, counter: str | None,
                    baseline: str | None) -> SummaryContext:
    from pytest_roofline.output.summary import SummaryContext

    directory = state.settings.directory if state.results_written else None  # never an earlier run's file
    return SummaryContext(machines, dict(fewer_cores or {}), directory, counter, baseline,
                          summary_width(terminalreporter), config.get_verbosity() > 0)


LOG_WIDTH = 120  # a CI log has no terminal: pytest assumes 80 columns, a log viewer shows 120 and more


def summary_width(terminalreporter: pytest.TerminalReporter) -> int:
    """The terminal's width; in a log (no terminal, no ``COLUMNS``) at least ``LOG_WIDTH``, so node ids are not
    cut to fit an 80-column terminal nobody looks at."""
    import os

    width = int(terminalreporter._tw.fullwidth)
    if not getattr(terminalreporter, "isatty", False) and not os.environ.get("COLUMNS", "").strip():
        return max(width, LOG_WIDTH)
    return width


def write_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config, records: list[TestRecord],
                  context: SummaryContext, extra: tuple[str, ...] = ()) -> None:
    """The roofline section of the terminal summary, the same for a serial session and the xdist controller:
    rendered from the results.json records; never raises."""
    state = config.stash[STATE]
    try:
        # test ids and kernel names: no escape sequences
        from pytest_roofline._safe_text import printable
        from pytest_roofline.output.summary import not_gated_line, summary_lines, wrap

        terminalreporter.write_sep("=", "roofline")
        history = [f"history: {state.history_file}"] if state.history_file else []
        for line in [*summary_lines(records, context), *wrap([*extra, *history], context.width)]:
            terminalreporter.write_line(printable(line))
        gated = not_gated_line(records)
        for line in wrap([gated] if gated else [], context.width):
            terminalreporter.write_line(line, yellow=True, bold=True)
    except Exception as exc:  # noqa: BLE001 - the summary must never turn a finished run into an internal error
        terminalreporter.write_line(f"roofline: could not write the summary: {exc!r}")
    if state.write_error:
        terminalreporter.write_line(state.write_error, red=True, bold=True)


def rereport(rereports: Rereports, record: TestRecord) -> None:
    """Report a test measured again at the end of the session once more, as its record now says."""
    again = record.contended
    if again is not None and again.remeasured:
        rereports.rereport(record, again.message)


def _identity(node: pytest.Item) -> Identity:
    """``params`` (the parametrize arguments, JSON-safe) and ``function`` (the node id without ``[...]``), which
    join the variants of one parametrized test in the history."""
    callspec = getattr(node, "callspec", None)
    params = {str(k): v if isinstance(v, (bool, int, float, str)) or v is None else repr(v)
              for k, v in (callspec.params.items() if callspec is not None else ())}
    return {"params": params, "function": node.nodeid.split("[", 1)[0]}


def _load_baseline(state: RooflineState, config: pytest.Config,
                   fallback: Path | HistoryStore | None = None) -> None:
    """Read ``--roofline-baseline`` (or ``fallback``, the history a ``--roofline-compare last`` that found no
    REF judges against) before the first test: a missing path is a usage error; unreadable files are skipped
    with one warning, and so is a baseline with nothing of this machine."""
    import warnings

    from pytest_roofline.errors import RooflineWarning
    from pytest_roofline.history.baseline import load_baseline
    from pytest_roofline.history.environment import git_state, versions
    from pytest_roofline.record.machine_key import machine_key

    settings = state.settings
    reference = settings.baseline if fallback is None else fallback
    from pytest_roofline.plugin.options import first_history

    if fallback is not None and isinstance(fallback, Path) and not fallback.exists():
        from pytest_roofline.history.baseline import Baseline

        state.baseline = Baseline(str(fallback), count=settings.baseline_sessions)  # a first night
        return
    if fallback is None and first_history(settings):
        from pytest_roofline.history.baseline import Baseline

        state.baseline = Baseline(str(reference), count=settings.baseline_sessions)
        warnings.warn(RooflineWarning(f"roofline baseline: no history in {str(reference)!r} yet: every test is new; "
                                      "this session starts it"), stacklevel=1)
        return
    if reference is None or (isinstance(reference, Path) and not reference.exists()):
        raise pytest.UsageError(f"--roofline-baseline: no such file or directory {str(reference)!r}")
    key = machine_key(state.machine().to_dict())
    git = git_state(config.rootpath)
    from pytest_roofline.errors import StoreError

    try:
        state.baseline = load_baseline(reference, key=key, branch=git.branch, count=settings.baseline_sessions,
                                       any_machine=settings.baseline_any_machine,
                                       environment={"torch": versions().get("torch")}, history=settings.history,
                                       # an uncommitted change is compared with its commit's sessions
                                       exclude_commit=git.commit if git.dirty is False else None)
    except StoreError as exc:
        from pytest_roofline.history.baseline import Baseline

        # the tests still run and their results are saved; the session fails at its end (fail_unsaved)
        state.store_error = f"the baseline could not be read: {exc}"
        state.baseline = Baseline(getattr(reference, "url", str(reference)), count=settings.baseline_sessions,
                                  notes=[state.store_error])
        warnings.warn(RooflineWarning(f"roofline baseline: {state.store_error}; no test is compared with it "
                                      "and the session will fail"), stacklevel=1)
        return
    if state.baseline.blind is not None:
        # a gate that cannot read its history must not rate every test new and pass
        state.store_error = f"the baseline could not be read: {state.baseline.blind}"
        warnings.warn(RooflineWarning(f"roofline baseline: {state.store_error}; the session will fail"),
                      stacklevel=1)
        return
    skipped = state.baseline.skipped
    if skipped:
        warnings.warn(RooflineWarning(f"roofline baseline: skipped {len(skipped)} unreadable file(s) or test "
                                      f"records under {str(reference)!r}: {'; '.join(skipped)}"), stacklevel=1)
    if not state.baseline.sessions:
        warnings.warn(RooflineWarning(f"roofline baseline: no session of this machine in {str(reference)!r}: "
                                      f"every test is new. {' '.join(state.baseline.notes)}"), stacklevel=1)


def _warn_unmatched(state: RooflineState, nodeids: list[str]) -> None:
    import warnings

    from pytest_roofline.errors import RooflineWarning
    from pytest_roofline.history.baseline import unmatched_note

    note = unmatched_note(state.baseline, nodeids) if state.baseline is not None else None
    if note is not None:
        warnings.warn(RooflineWarning(note), stacklevel=1)


def _core_roofs_progress(request: pytest.FixtureRequest,
                         why: str = "roofs for the cores this test runs on") -> Callable[[str], None]:
    """Say when roofs for fewer cores (or the host's, ``why``) are characterized mid-session (it takes a while),
    in two lines."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")

    def progress(message: str) -> None:
        if reporter is not None and message.startswith(("characterizing", "done in")):
            reporter.write_line(f"roofline: {message} ({why})")

    return progress


def session_meta(state: RooflineState, session: pytest.Session, malloc: str) -> SessionMeta:
    """The ``session`` block of results.json and the history (the xdist controller adds its workers')."""
    status = int(session.exitstatus)
    meta: SessionMeta = {"id": state.session_id, "directory": str(state.session_dir),
                         "start": state.started.isoformat(), "end": _dt.datetime.now(_dt.timezone.utc).isoformat(),
                         "exit_status": status, "interrupted": status == pytest.ExitCode.INTERRUPTED, "malloc": malloc}
    if state.compare_ref:
        meta["compare"] = dict(state.compare_ref)
    return meta
