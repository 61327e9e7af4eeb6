"""Option values checked before any test runs: a bad ``--roofline-cores`` or a counter no plugin provides is a
usage error (exit 4) naming the option and what it accepts, not a traceback in every test or a silent pass of
tests that declare their work. Called from ``pytest_configure``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_roofline.session.settings import COUNTERS

if TYPE_CHECKING:
    from pytest_roofline.session.settings import Settings

_COUNTER_HELP = ("built-in: analytic, declared, ncu, auto; a plugin or conftest adds one with the "
                 "pytest_roofline_make_counter hook")


def check_cores(settings: Settings) -> None:
    """``--roofline-cores``: a count no larger than, and a list within, the cores this process may run on."""
    from pytest_roofline.host.cores import base_affinity

    cores = settings.cores
    if cores is None:  # measured wherever the OS runs the call: nothing to check
        return
    allowed = base_affinity()
    shown = ",".join(map(str, allowed))
    if cores.mode == "count" and cores.count is not None and cores.count > len(allowed):
        raise pytest.UsageError(f"--roofline-cores / ini roofline_cores: {cores.count} cores asked for, this "
                                f"process may run on {len(allowed)} ({shown}); give auto, all, a count up to "
                                f"{len(allowed)} or a list of these cores")
    missing = [c for c in cores.cores if c not in allowed] if cores.mode == "list" else []
    if missing:
        raise pytest.UsageError(f"--roofline-cores / ini roofline_cores: core(s) {','.join(map(str, missing))} "
                                f"are not available to this process (it may run on {shown}); give auto, all, a "
                                "count or a list of these cores")


def check_compare_python(settings: Settings) -> None:
    """``--roofline-compare-python``: an interpreter that exists and runs (a path, or a name on PATH)."""
    import shutil

    given = settings.compare_python
    if given and shutil.which(given) is None:
        raise pytest.UsageError(f"--roofline-compare-python / ini roofline_compare_python: {given!r} is not an "
                                "executable Python interpreter (give the path of REF's virtual environment's "
                                "bin/python, or leave it empty for this one)")


def check_compare_counter(settings: Settings) -> None:
    """``--roofline-compare`` with ``--roofline-counter ncu``: the pairs time each call site in twin processes
    while ncu counts in a child of its own, so nothing would be compared; ``auto`` counts analytically there."""
    if settings.compare and settings.counter == "ncu":
        raise pytest.UsageError("--roofline-counter ncu does not combine with --roofline-compare: the A/B pairs time "
                                "each call site in twin processes, and ncu counts in a profiled child of its own; "
                                "use --roofline-counter analytic (or auto, which counts analytically in a compare "
                                "session) and run ncu in a plain --roofline session")


def counter_known(name: str, config: pytest.Config) -> bool:
    """Whether ``name`` is built in or a plugin registered so far makes a counter of that name."""
    if name in COUNTERS:
        return True
    try:
        return config.hook.pytest_roofline_make_counter(name=name, config=config) is not None
    except Exception:  # noqa: BLE001 - the plugin knows the name but cannot make it now: said at first use
        return True


class CounterCheck:
    """A counter name no plugin answered at configure time may come from a conftest below the rootdir, loaded
    while collecting: asked again once collection is done, before the first test."""

    def __init__(self, name: str) -> None:
        self.name = name

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        from pytest_roofline.plugin.markers import wants_roofline

        if config.option.collectonly or not any(wants_roofline(item) for item in items):
            return
        if not counter_known(self.name, config):
            raise pytest.UsageError(f"--roofline-counter / ini roofline_counter: no plugin provides a counter "
                                    f"named {self.name!r} ({_COUNTER_HELP})")


def check_at_start(settings: Settings, config: pytest.Config, mode_name: str) -> None:
    """Every value that can be checked before the tests: usage errors now."""
    if not settings.enabled or mode_name not in ("roofline-session", "roofline-xdist-controller"):
        return
    check_cores(settings)
    check_compare_python(settings)
    check_compare_counter(settings)
    if settings.counter not in COUNTERS and not counter_known(settings.counter, config):
        if mode_name == "roofline-session" and not config.pluginmanager.has_plugin("roofline-counter-check"):
            config.pluginmanager.register(CounterCheck(settings.counter), "roofline-counter-check")
        elif mode_name == "roofline-xdist-controller":
            raise pytest.UsageError(f"--roofline-counter / ini roofline_counter: no plugin provides a counter "
                                    f"named {settings.counter!r} ({_COUNTER_HELP})")
