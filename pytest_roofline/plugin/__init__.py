"""pytest glue (the ``pytest11`` entry point): options, the marker, the hooks every mode shares, and the
registration of one plugin object for the mode of this process (:mod:`pytest_roofline.plugin.modes`).

Kept thin and import-light: torch, matplotlib and the characterization load only once ``--roofline`` is
given and a test needs them.

The ncu counter (``--roofline-counter ncu``, or ``auto`` on a machine with a GPU, ncu and counter access):
``roofline.measure`` times each call site here and leaves its counts pending; after the test body returns, the
measuring session profiles the test once in a child under ncu (:mod:`pytest_roofline.counters.ncu.deferred`) and
gates on the verdict. In that child (``PYTEST_ROOFLINE_NCU_CHILD=1``) the fixture only marks NVTX ranges
(:mod:`pytest_roofline.counters.ncu.child`) and the plugin judges and writes nothing. A child that fails, or a
range without kernels, is an error of the test, raised in its teardown; ERR_NVGPUCTRPERM skips the test
(explicit ``ncu``) or switches ``auto`` to the analytic counter for the rest of the session, with one warning
(:mod:`pytest_roofline.session.ncu_fallback`).
"""

from __future__ import annotations

import warnings
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_roofline.plugin.keys import STATE
from pytest_roofline.plugin.markers import MARKER_HELP, marker_options
from pytest_roofline.plugin.options import add_options, first_history, implied_by, read_settings
from pytest_roofline.plugin.select import select_mode
from pytest_roofline.session.settings import SettingError, parse_bool
from pytest_roofline.session.state import RooflineState

if TYPE_CHECKING:
    from pytest_roofline.counters import Counter
    from pytest_roofline.model import Machine
    from pytest_roofline.session.settings import Settings

THP_NOTE = pytest.StashKey[str]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_roofline.plugin import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


class BuiltinCounters:
    """The built-in counters, made through ``pytest_roofline_make_counter`` like any plugin's."""

    @pytest.hookimpl(trylast=True)
    def pytest_roofline_make_counter(self, name: str, config: pytest.Config) -> Counter | None:
        from pytest_roofline.session.state import builtin_counter

        return builtin_counter(name)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    try:
        settings = read_settings(config)
    except SettingError as exc:
        raise pytest.UsageError(str(exc)) from None
    if settings.machine_file is not None and not settings.machine_file.is_file():
        raise pytest.UsageError(f"--roofline-machine: no such file {str(settings.machine_file)!r}")
    state = config.stash[STATE] = RooflineState(settings)
    name, mode = select_mode(config, state)
    if settings.enabled and name in ("roofline-session", "roofline-xdist-controller"):
        from pytest_roofline.history.results_dir import ResultsDirError, check_writable

        try:
            check_writable(settings.directory)
        except ResultsDirError as exc:
            raise pytest.UsageError(f"--roofline-dir: {exc}") from None
        check_history_paths(settings)
    if not config.pluginmanager.has_plugin("roofline-builtin-counters"):
        config.pluginmanager.register(BuiltinCounters(), "roofline-builtin-counters")
    from pytest_roofline.plugin.start_checks import check_at_start

    check_at_start(settings, config, name)  # option values: usage errors before any test
    if not config.pluginmanager.has_plugin(name):
        config.pluginmanager.register(mode, name)
        if name in ("roofline-session", "roofline-xdist-controller"):  # the processes pytest reports from
            from pytest_roofline.plugin.rereport import Rereports

            mode.rereports = Rereports(config)  # type: ignore[attr-defined]
            config.pluginmanager.register(mode.rereports, "roofline-rereports")  # type: ignore[attr-defined]
    if settings.enabled and settings.compare and name != "roofline-twin":
        if name != "roofline-session":
            raise pytest.UsageError("--roofline-compare runs the tests serially beside REF's twin on the same cores; "
                                    "it does not run under pytest-xdist (drop -n) or inside an ncu-profiled child")
        from pytest_roofline.ab.plugin.session import CompareSession
        from pytest_roofline.plugin.markers import wants_roofline

        if not config.pluginmanager.has_plugin("roofline-compare"):
            config.pluginmanager.register(CompareSession(state, config, wants_roofline), "roofline-compare")
    state.make_counter = lambda counter: config.hook.pytest_roofline_make_counter(name=counter, config=config)
    if settings.enabled and settings.malloc == "tuned":
        from pytest_roofline.host.allocator import enable_torch_thp, tune_malloc

        pages = config.stash.get(THP_NOTE, None) or enable_torch_thp()
        state.malloc = f"{tune_malloc() or 'default (not glibc)'}; {pages}"


def check_history_paths(settings: Settings) -> None:
    """``--roofline-history`` must be writable and ``--roofline-baseline`` a history directory, a history file
    or a results.json (read bounded, as the gate reads it): usage errors before any test, as --roofline-dir."""
    from pytest_roofline.history import reader, writer

    if isinstance(settings.history, Path):  # a store is reached at its first use
        try:
            writer.check_writable(settings.history)
        except ValueError as exc:
            raise pytest.UsageError(f"--roofline-history: {exc}") from None
    reference = settings.baseline
    if reference is None or first_history(settings):
        return
    try:
        reader.check_reference(reference)
    except FileNotFoundError:
        raise pytest.UsageError(f"--roofline-baseline: no such file or directory {str(reference)!r}") from None
    except (OSError, ValueError) as exc:
        raise pytest.UsageError(f"--roofline-baseline: {str(reference)!r} is not a history directory, a history "
                                f"file or a results.json: {exc}") from None


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Ask PyTorch for huge pages before any conftest can import it and allocate (it reads the setting once,
    at its first allocation): only under --roofline with --roofline-malloc tuned."""
    from pytest_roofline.host.process_role import is_profiled_child

    def early(name: str) -> object:
        value = getattr(early_config.known_args_namespace, name, None)
        return early_config.getini(name) if value is None else value

    from pytest_roofline.plugin.args_check import check_rootdir

    check_rootdir(early_config, args)  # a path given as `--roofline-baseline PATH` must not move the rootdir
    try:
        enabled = parse_bool(early("roofline"), "--roofline") or bool(
            implied_by(early_config, early_config.known_args_namespace))
        wanted = enabled and str(early("roofline_malloc")) == "tuned"
    except (SettingError, ValueError):
        return  # a bad value is reported as a usage error by pytest_configure
    if wanted and not is_profiled_child():
        from pytest_roofline.host.allocator import enable_torch_thp

        early_config.stash[THP_NOTE] = enable_torch_thp()
    if enabled and not is_profiled_child():
        from pytest_roofline.plugin.xdist import assign_gpu_early

        assign_gpu_early(early_config)  # one GPU per xdist worker, before any conftest can initialize CUDA


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> Generator[None, object, object]:
    """Validate roofline marker arguments while collecting, so mistakes are collection errors."""
    result = yield
    items = result if isinstance(result, list) else [result]
    for item in items:
        if isinstance(item, pytest.Item):
            marker_options(item)
    return result


@pytest.fixture(scope="session")
def roofline_machine(pytestconfig: pytest.Config) -> Machine:
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
