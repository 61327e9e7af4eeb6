"""pytest glue: options, the ``roofline`` marker and fixtures, the gate, the summary and artifacts.

Kept thin and import-light: torch, matplotlib and the characterization load only once ``--roofline`` is
given and a test needs them.

The ncu counter (``--roofline-counter ncu``, or ``auto`` on a machine with a GPU, ncu and counter access):
``roofline.measure`` times each call site here and leaves its counts pending; after the test body returns,
:func:`pytest_runtest_call` profiles the test once in a child under ncu (:mod:`pytest_roofline.counters.ncu.parent`) and
gates on the verdict. In that child (``PYTEST_ROOFLINE_NCU_CHILD=1``) the fixture only marks NVTX ranges
(:mod:`pytest_roofline.counters.ncu.child`) and the plugin judges and writes nothing. A child that fails, or a range
without kernels, is an error of the test, raised in its teardown; ERR_NVGPUCTRPERM skips the test (explicit
``ncu``) or switches ``auto`` to the analytic counter for the rest of the session, with one warning.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.fixture_types import RooflineFixture
from pytest_roofline.measure.settings import (
    CONFIRM_MODES,
    COUNTERS,
    DEVICES,
    MALLOC_POLICIES,
    OPS_MODES,
    PROBE_MODES,
    UNCOUNTED_POLICIES,
    MarkerOptions,
    SettingError,
    parse_bool,
    parse_choice,
    parse_counter,
    parse_seconds,
)
from pytest_roofline.measure.state import RooflineState, Settings, TestEntry

MARKER_HELP = (
    "roofline(min_fraction=None): measure the test's roofline.measure() calls under --roofline and fail "
    "it when the attained fraction of the roofline is below min_fraction (a number in (0, 1]); without "
    "min_fraction the test is reported, not gated."
)

# (option, ini key, help, default) -- every option has an ini key of the same name with underscores.
_OPTIONS: tuple[tuple[str, str, str, str], ...] = (
    ("--roofline-dir", "roofline_dir", "directory for results.json, charts and kernel tables", ".roofline"),
    ("--roofline-machine", "roofline_machine",
     "pinned machine ceilings (JSON or TOML) to use instead of characterizing this machine", ""),
    ("--roofline-counter", "roofline_counter",
     (f"where FLOPs and bytes come from: {'|'.join(COUNTERS)} (auto: ncu when a CUDA GPU, Nsight Compute "
      "and counter access are present, else analytic), or a counter a plugin provides"), "auto"),
    ("--roofline-device", "roofline_device",
     f"device to characterize: {'|'.join(DEVICES)} (auto: cuda when torch sees a GPU)", "auto"),
    ("--roofline-max-time", "roofline_max_time",
     "time budget of a call site's whole measurement, warm-up included, in seconds", "1.0"),
    ("--roofline-malloc", "roofline_malloc",
     (f"{'|'.join(MALLOC_POLICIES)}: tuned fixes glibc's mmap/trim thresholds so large outputs do not "
     "page-fault in some calls and not others"), "tuned"),
    ("--roofline-cores", "roofline_cores",
     ("cores to measure on: auto (half the machine's cores, the least loaded at each call site, judged "
      "against roofs for that many), all, a count N, or a list such as 0,1 or 0-3"), "auto"),
    ("--roofline-probe", "roofline_probe",
     (f"{'|'.join(PROBE_MODES)}: live times call sites whose bytes stream from DRAM beside a probe of the DRAM "
      "roof and judges each call against it (main memory's bandwidth changes with the host's other tenants)"),
     "live"),
    ("--roofline-confirm", "roofline_confirm",
     (f"{'|'.join(CONFIRM_MODES)}: on measures a test below its min_fraction once more at once and fails it "
      "only if the faster of the two measurements is below too (a host hiccup rarely lasts both)"), "on"),
    ("--roofline-ops", "roofline_ops",
     (f"{'|'.join(OPS_MODES)}: time every op of the analytic counter once more under torch.profiler (apart from "
      "the timed loop, whose verdict stands) for every test, for tests below their min_fraction, or never"),
     "failed"),
    ("--roofline-uncounted", "roofline_uncounted",
     (f"{'|'.join(UNCOUNTED_POLICIES)}: what a region that ran FLOP-bearing ops without a counting rule does "
      "(warn: marked in the summary; fail: the test fails); the marker's uncounted= overrides it"), "warn"),
)


STATE = pytest.StashKey[RooflineState]()
ENTRY = pytest.StashKey[TestEntry]()
NCU_ERROR = pytest.StashKey[str]()  # set in the call phase, raised in teardown: an error, not a failure


def _profiled_child() -> bool:
    from pytest_roofline.counters.ncu.child import is_profiled_child

    return is_profiled_child()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_roofline.plugin import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


class BuiltinCounters:
    """The built-in counters, made through ``pytest_roofline_make_counter`` like any plugin's."""

    @pytest.hookimpl(trylast=True)
    def pytest_roofline_make_counter(self, name: str, config: pytest.Config) -> Any:
        from pytest_roofline.measure.state import builtin_counter

        return builtin_counter(name)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("roofline", "roofline performance gates")
    group.addoption("--roofline", action="store_true", default=None, dest="roofline",
                    help="measure tests marked @pytest.mark.roofline and gate them on their roofline fraction")
    parser.addini("roofline", "measure roofline-marked tests as if --roofline were given", type="bool",
                  default=False)
    for flag, ini, help_text, default in _OPTIONS:
        group.addoption(flag, dest=ini, default=None, help=f"{help_text} (ini: {ini}; default: {default!r})")
        parser.addini(ini, help_text, default=default)
    group.addoption("--roofline-strict", action="store_true", default=None, dest="roofline_strict",
                    help="let a contended measurement (no free core) fail its gate too (ini: roofline_strict)")
    parser.addini("roofline_strict", "contended measurements may fail their gate", type="bool", default=False)
    group.addoption("--roofline-recharacterize", action="store_true", default=False,
                    dest="roofline_recharacterize",
                    help="measure the machine again instead of using the cached characterization")


def _setting(config: pytest.Config, name: str) -> Any:
    value = config.getoption(name)
    return config.getini(name) if value is None else value


def _read_settings(config: pytest.Config) -> Settings:
    machine_file = str(_setting(config, "roofline_machine") or "").strip()
    return Settings(
        enabled=parse_bool(_setting(config, "roofline"), "--roofline / ini roofline"),
        directory=Path(str(_setting(config, "roofline_dir"))),
        machine_file=Path(machine_file) if machine_file else None,
        counter=parse_counter(_setting(config, "roofline_counter")),
        device=parse_choice(_setting(config, "roofline_device"), DEVICES, "--roofline-device"),
        max_time_s=parse_seconds(_setting(config, "roofline_max_time"), "--roofline-max-time"),
        recharacterize=bool(config.getoption("roofline_recharacterize")),
        malloc=parse_choice(_setting(config, "roofline_malloc"), MALLOC_POLICIES, "--roofline-malloc"),
        cores=_cores_setting(_setting(config, "roofline_cores")),
        strict=parse_bool(_setting(config, "roofline_strict"), "--roofline-strict / ini roofline_strict"),
        uncounted=parse_choice(_setting(config, "roofline_uncounted"), UNCOUNTED_POLICIES, "--roofline-uncounted"),
        probe=parse_choice(_setting(config, "roofline_probe"), PROBE_MODES, "--roofline-probe"),
        confirm=parse_choice(_setting(config, "roofline_confirm"), CONFIRM_MODES, "--roofline-confirm"),
        ops=parse_choice(_setting(config, "roofline_ops"), OPS_MODES, "--roofline-ops / ini roofline_ops"),
    )


def _cores_setting(value: Any) -> Any:
    from pytest_roofline.host.cores import CoresSettingError, parse_cores

    try:
        return parse_cores(value, "--roofline-cores / ini roofline_cores")
    except CoresSettingError as exc:
        raise SettingError(str(exc)) from None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    try:
        settings = _read_settings(config)
    except SettingError as exc:
        raise pytest.UsageError(str(exc)) from None
    if settings.machine_file is not None and not settings.machine_file.is_file():
        raise pytest.UsageError(f"--roofline-machine: no such file {str(settings.machine_file)!r}")
    if settings.enabled and not _profiled_child():
        from pytest_roofline.output.results_dir import ResultsDirError, check_writable

        try:
            check_writable(settings.directory)
        except ResultsDirError as exc:
            raise pytest.UsageError(f"--roofline-dir: {exc}") from None
    state = config.stash[STATE] = RooflineState(settings)
    if not config.pluginmanager.has_plugin("roofline-builtin-counters"):
        config.pluginmanager.register(BuiltinCounters(), "roofline-builtin-counters")
    state.make_counter = lambda name: config.hook.pytest_roofline_make_counter(name=name, config=config)
    if settings.enabled and settings.malloc == "tuned":
        from pytest_roofline.host.allocator import enable_torch_thp, tune_malloc

        pages = config.stash.get(THP_NOTE, None) or enable_torch_thp()
        state.malloc = f"{tune_malloc() or 'default (not glibc)'}; {pages}"


THP_NOTE = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Ask PyTorch for huge pages before any conftest can import it and allocate (it reads the setting once,
    at its first allocation): only under --roofline with --roofline-malloc tuned."""
    def early(name: str) -> Any:
        value = getattr(early_config.known_args_namespace, name, None)
        return early_config.getini(name) if value is None else value

    try:
        wanted = parse_bool(early("roofline"), "--roofline") and str(early("roofline_malloc")) == "tuned"
    except (SettingError, ValueError):
        return  # a bad value is reported as a usage error by pytest_configure
    if wanted and not _profiled_child():
        from pytest_roofline.host.allocator import enable_torch_thp

        early_config.stash[THP_NOTE] = enable_torch_thp()


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> Generator[None, Any, Any]:
    """Validate roofline marker arguments while collecting, so mistakes are collection errors."""
    result = yield
    items = result if isinstance(result, list) else [result]
    for item in items:
        if isinstance(item, pytest.Item):
            _marker_options(item)
    return result


def _marker_options(item: pytest.Item) -> MarkerOptions | None:
    marker = item.get_closest_marker("roofline")
    if marker is None:
        return None
    try:
        return MarkerOptions.from_marker(marker.args, marker.kwargs)
    except SettingError as exc:
        raise pytest.Collector.CollectError(f"{item.nodeid}: {exc}") from None


def _wants_roofline(item: pytest.Item) -> bool:
    return item.get_closest_marker("roofline") is not None or "roofline" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash[STATE]
    if not state.settings.enabled or config.option.collectonly or _profiled_child():
        return
    if not any(_wants_roofline(item) for item in items):
        return
    if state.settings.counter == "ncu":  # say what is missing before any test runs
        from pytest_roofline.counters.ncu.parent import NcuUnavailable

        try:
            state.choose_counter()
        except NcuUnavailable as exc:
            raise pytest.UsageError(str(exc)) from None
    # Characterize (or load the pinned machine) before any test runs, outside output capture.
    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def progress(message: str) -> None:
        if reporter is not None:
            reporter.write_line(f"roofline: {message}")

    try:
        state.machine(progress=progress)
    except (OSError, ValueError) as exc:
        raise pytest.UsageError(f"roofline: cannot get machine ceilings: {exc}") from None
    state.pin_worker()  # an xdist worker stays on its own cores from here on


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is not None:
        state.unpin_worker()


@pytest.fixture(scope="session")
def roofline_machine(pytestconfig: pytest.Config) -> Any:
    """The machine's roofline ceilings (characterized once per session, cached by fingerprint)."""
    state = pytestconfig.stash[STATE]
    if state.settings.enabled or state.loaded_machine is not None:
        return state.machine()
    # Without --roofline nothing was characterized up front: say so, and show the progress, rather than
    # spend many silent seconds inside a test's setup.
    from pytest_roofline.errors import RooflineWarning

    source = (f"loading the pinned ceilings of {state.settings.machine_file}" if state.settings.machine_file
              else "characterizing this machine (cached by fingerprint; ~20 s when cold)")
    warnings.warn(RooflineWarning(f"roofline_machine without --roofline: {source}"), stacklevel=2)
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")

    def progress(message: str) -> None:
        if reporter is not None and capture is not None:
            with capture.global_and_fixture_disabled():
                reporter.write_line(f"roofline: {message}")

    return state.machine(progress=progress)


@pytest.fixture
def roofline(request: pytest.FixtureRequest) -> RooflineFixture:
    """Measure a callable: ``y = roofline.measure(fn, *args, **kwargs)`` returns ``fn(*args, **kwargs)``."""
    if _profiled_child():
        from pytest_roofline.counters.ncu.child import ChildRecorder

        return ChildRecorder()
    from pytest_roofline.measure.regions import Recorder
    from pytest_roofline.measure.timing import TimingPolicy

    state = request.config.stash[STATE]
    options = _marker_options(request.node) if isinstance(request.node, pytest.Item) else None
    recorder = Recorder(
        enabled=state.settings.enabled,
        machine=state.machine,
        counter=state.counter,
        policy=TimingPolicy(max_time_s=state.settings.max_time_s),
    )
    if state.settings.enabled:  # cores of its own, judged against roofs for that many cores
        recorder.cores = state.core_planner()
        recorder.machine_for_cores = lambda count: state.machine_for_cores(count, _core_roofs_progress(request))
        recorder.probe_mode = state.settings.probe
        recorder.probe_cache = state.probe_cache
        recorder.ops_mode = state.settings.ops
    entry = TestEntry(request.node.nodeid, options.min_fraction if options else None, recorder)
    request.node.stash[ENTRY] = entry
    if state.settings.enabled:
        state.tests[entry.nodeid] = entry
    return recorder


def _core_roofs_progress(request: pytest.FixtureRequest) -> Any:
    """Say when roofs for fewer cores are characterized mid-session (it takes a while), in two lines."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")

    def progress(message: str) -> None:
        if reporter is not None and message.startswith(("characterizing", "done in")):
            reporter.write_line(f"roofline: {message} (roofs for the cores this test runs on)")

    return progress


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    entry = item.stash.get(ENTRY, None)
    try:
        result = yield  # a test that raised is not judged: its own failure says more
    except BaseException:
        if entry is not None:
            entry.recorder.release_pending()
        raise
    state = item.config.stash[STATE]
    if not state.settings.enabled or _profiled_child():
        return result
    if entry is not None and entry.recorder.pending:
        try:
            error = _settle_pending(item, state, entry)
        finally:
            entry.recorder.release_pending()
        if error is not None:
            item.stash[NCU_ERROR] = error
            return result
    if item.get_closest_marker("roofline") is None:
        return result
    if entry is None or not entry.recorder.regions:
        from pytest_roofline.errors import RooflineWarning

        item.warn(RooflineWarning("test is marked roofline but measured nothing: call "
                                  "roofline.measure(fn, *args) through the `roofline` fixture"))
        return result
    options = _marker_options(item)
    policy = (options.uncounted if options and options.uncounted else None) or state.settings.uncounted
    if policy == "fail":
        from pytest_roofline.output.text import uncounted_text

        missing = uncounted_text(entry.recorder.regions)
        if missing:
            pytest.fail(f"roofline: FLOP-bearing ops without a counting rule ran ({missing}); the fraction would "
                        "be too low. Declare the work (roofline.declare) or set uncounted='warn'.", pytrace=False)
    verdict = entry.recorder.verdict()
    impossible = _roof_check(state, entry, verdict)
    if impossible is not None:
        item.stash[NCU_ERROR] = impossible  # raised in teardown: an error of the test, never a pass
        return result
    if entry.min_fraction is not None and verdict.fraction < entry.min_fraction:
        excused = not state.settings.strict and item.get_closest_marker("xfail") is None
        if excused and entry.recorder.is_contended():
            return result  # no free core: reported as contended and measured again at the end of the session
        if state.settings.confirm == "on" and item.get_closest_marker("xfail") is None:
            first = verdict.fraction
            if entry.recorder.confirm():  # fail only when a second measurement, taken at once, is below too
                verdict = entry.recorder.verdict()
                entry.extra["confirmed"] = {"first": first, "second": verdict.fraction}
                if verdict.fraction >= entry.min_fraction:
                    return result
        from pytest_roofline.output.session_output import failure_report

        entry.recorder.time_ops()  # per-op times for its artifacts (--roofline-ops failed|always)
        message, paths = failure_report(state.session_dir, item.nodeid, state.machine(),
                                        entry.recorder.regions, verdict, entry.min_fraction, entry.details)
        entry.artifacts.extend(str(p) for p in paths)
        pytest.fail(message, pytrace=False)
    return result


def _roof_check(state: RooflineState, entry: TestEntry, verdict: Any) -> str | None:
    """Notes for emulated precisions (into results.json), and the error for a fraction no roof allows."""
    from pytest_roofline.output.session_output import impossible_fraction_message, roof_notes

    machine = state.machine()
    notes = roof_notes(machine, verdict.flops)
    if notes:
        entry.extra["roof_notes"] = notes
    s = state.settings
    origin = (f"pinned file {s.machine_file}" if s.machine_file is not None else
              f"the characterization cache (fingerprint {machine.info.get('fingerprint_hash', '?')})")
    return impossible_fraction_message(verdict, machine, origin)


def _settle_pending(item: pytest.Item, state: RooflineState, entry: TestEntry) -> str | None:
    """Profile the test under ncu and judge its pending regions; return an error message for teardown.

    ERR_NVGPUCTRPERM skips the test under explicit ``ncu``; under ``auto``, it (or a missing ncu or GPU) makes
    the analytic counter count this test's regions and every later one.
    """
    from pytest_roofline.counters.ncu import parent as ncu_gate
    from pytest_roofline.counters.ncu.backend import CountersNotPermitted, NcuBackendError, NcuNotFound, NoGpu

    if state.ncu_denied is not None:
        entry.extra["ncu"] = {"error": state.ncu_denied, "logs": []}
        pytest.skip(state.ncu_denied)
    setup = state.choose_counter().setup
    if setup is None:  # defensive: regions are pending only while the session's counter is ncu
        _count_with_analytic(state, entry)
        return None
    config = item.config
    try:
        outcome = ncu_gate.profile_test(
            entry.recorder, item.nodeid, state.session_dir, state.machine(), setup,
            cwd=config.rootpath,
            extra_pytest_args=ncu_gate.child_pytest_args(config.rootpath, config.inipath,
                                                         config.pluginmanager.has_plugin("xdist")),
        )
    except (CountersNotPermitted, NcuNotFound, NoGpu) as exc:
        if state.settings.counter == "auto":
            state.fall_back_to_analytic(str(exc), item.warn)
            _count_with_analytic(state, entry)
            return None
        entry.extra["ncu"] = ncu_gate.error_section(exc)
        if isinstance(exc, CountersNotPermitted):
            state.ncu_denied = f"roofline: {exc}"
            pytest.skip(state.ncu_denied)
        return f"roofline: --roofline-counter=ncu: {exc}"
    except NcuBackendError as exc:  # the child failed or timed out, or no kernel ran in the range
        entry.extra["ncu"] = ncu_gate.error_section(exc)
        return f"roofline: {exc}"
    except Exception as exc:  # noqa: BLE001 - e.g. an unreadable report: the test's error, not pytest's crash
        entry.extra["ncu"] = ncu_gate.error_section(exc)
        return f"roofline: could not use the ncu profile of {item.nodeid}: {exc!r}"
    entry.artifacts.extend(outcome.artifacts)
    entry.extra.update(outcome.extra)
    entry.details = outcome.details
    return None


def _count_with_analytic(state: RooflineState, entry: TestEntry) -> None:
    from pytest_roofline.measure.regions import CounterUnavailableError

    try:
        entry.recorder.count_pending(state.counter())
    except CounterUnavailableError as exc:
        pytest.fail(f"roofline: {exc}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    result = yield
    entry = item.stash.get(ENTRY, None)
    if entry is not None and entry.recorder is not None:
        entry.recorder.calls.clear()  # the gate has decided: let the test's tensors go (contended ones stay)
    message = item.stash.get(NCU_ERROR, None)
    if message is not None:
        del item.stash[NCU_ERROR]
        pytest.fail(message, pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    entry = item.stash.get(ENTRY, None)
    if entry is not None and (report.when == "call" or report.failed):
        if hasattr(report, "wasxfail"):
            entry.outcome = "xfailed" if report.skipped else "xpassed"
        elif report.when != "call":
            entry.outcome = "error" if report.failed else entry.outcome
        else:
            entry.outcome = report.outcome
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(STATE, None)
    if state is None or not state.settings.enabled or not state.tests:
        return
    _remeasure_contended(session, state)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # workers do not share one results file; see README (xdist)
    import datetime as _dt

    from pytest_roofline.output.session_output import write_session_results

    status = int(session.exitstatus)
    meta = {"id": state.session_id, "directory": str(state.session_dir), "start": state.started.isoformat(),
            "end": _dt.datetime.now(_dt.timezone.utc).isoformat(), "exit_status": status,
            "interrupted": status == pytest.ExitCode.INTERRUPTED, "malloc": state.malloc}
    try:
        write_session_results(state.settings.directory, state.loaded_machine, state.tests.values(),
                              {"session": meta}, session_id=state.session_id)
    except (OSError, ValueError) as exc:  # a full disk must not hide the verdicts: said in the summary
        state.write_error = (f"roofline: could not write the results under {str(state.settings.directory)!r}: "
                             f"{getattr(exc, 'strerror', None) or exc}")


def _remeasure_contended(session: pytest.Session, state: RooflineState) -> None:
    """Measure contended call sites again now that the session's own work is done; a test that passed only
    because its measurement was contended fails the session if it is still below its threshold uncontended."""
    for entry in state.tests.values():
        if entry.recorder is None or not entry.recorder.contended:
            continue
        entry.recorder.remeasure_contended()
        verdict = entry.recorder.verdict()
        below = entry.min_fraction is not None and verdict is not None and verdict.fraction < entry.min_fraction
        entry.extra["contended"] = {"remeasured": True, "still_contended": entry.recorder.is_contended()}
        if below and not entry.recorder.is_contended() and entry.outcome == "passed":
            entry.outcome = "failed"
            entry.extra["contended"]["failed_when_remeasured"] = True
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        entry.recorder.contended.clear()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None or not state.settings.enabled or not state.tests:
        return
    try:
        from pytest_roofline.output.session_output import summary_lines

        terminalreporter.write_sep("=", "roofline")
        for line in summary_lines(state.loaded_machine, state.tests.values(), state.settings.directory,
                                  terminalreporter._tw.fullwidth, state.counter_label, state.machines_by_cores):
            terminalreporter.write_line(line)
    except Exception as exc:  # noqa: BLE001 - the summary must never turn a finished run into an internal error
        terminalreporter.write_line(f"roofline: could not write the summary: {exc!r}")
    if state.write_error:
        terminalreporter.write_line(state.write_error, red=True, bold=True)
