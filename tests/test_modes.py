"""Which plugin object a process registers, and that each carries only its own hooks."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_roofline.host.process_role import CHILD_ENV
from pytest_roofline.plugin import modes, select, xdist
from pytest_roofline.session.settings import Settings
from pytest_roofline.session.state import RooflineState


def state(enabled: bool) -> RooflineState:
    return RooflineState(Settings(enabled=enabled, directory=Path(".roofline"), machine_file=None, counter="auto",
                                  device="cpu", max_time_s=1.0, recharacterize=False, malloc="default"))


def config(dist: str = "no", worker: bool = False) -> Any:
    fake = SimpleNamespace(option=SimpleNamespace(dist=dist))
    if worker:
        fake.workerinput = {"workerid": "gw0"}
    return fake


@pytest.mark.parametrize(("enabled", "cfg", "child", "name", "kind"), [
    (True, config(), False, "roofline-session", modes.MeasuringSession),
    (False, config(), False, "roofline-passive", modes.Passive),
    (True, config(dist="load", worker=True), False, "roofline-xdist-worker", xdist.XdistWorker),
    (True, config(dist="load"), False, "roofline-xdist-controller", xdist.XdistController),
    (True, config(), True, "roofline-profiled-child", modes.ProfiledChild),
    (False, config(dist="load"), True, "roofline-profiled-child", modes.ProfiledChild),
])
def test_one_mode_per_process(monkeypatch: pytest.MonkeyPatch, enabled: bool, cfg: Any, child: bool, name: str,
                              kind: type) -> None:
    if child:
        monkeypatch.setenv(CHILD_ENV, "1")
    else:
        monkeypatch.delenv(CHILD_ENV, raising=False)
    chosen_name, mode = select.select_mode(cfg, state(enabled))
    assert (chosen_name, type(mode)) == (name, kind)


def hooks(kind: type) -> set[str]:
    return {name for name in dir(kind) if name.startswith("pytest_")}


def test_only_measuring_modes_carry_measuring_hooks() -> None:
    assert hooks(modes.Passive) == set()
    # The profiled child only logs each test's start and outcome to the batched run's progress file.
    assert hooks(modes.ProfiledChild) == {"pytest_runtest_logstart", "pytest_runtest_logreport",
                                          "pytest_runtest_logfinish"}
    # The controller runs no test: it gathers the workers' records, and never measures or gates.
    assert not {"pytest_runtest_call", "pytest_collection_modifyitems"} & hooks(xdist.XdistController)
    assert "pytest_testnodedown" in hooks(xdist.XdistController)
    assert {"pytest_runtest_call", "pytest_sessionfinish", "pytest_terminal_summary"} <= hooks(modes.MeasuringSession)
    assert modes.MeasuringSession.writes_results and not xdist.XdistWorker.writes_results


def test_a_session_without_roofline_imports_nothing_heavy(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Configure, collect and run a marked test without --roofline: no torch, numpy, matplotlib or ncu backend."""
    pytester.makeconftest(
        "import sys\n"
        "def pytest_sessionfinish(session):\n"
        "    heavy = ('torch', 'numpy', 'matplotlib', 'cupy', 'pytest_roofline.counters.ncu.backend')\n"
        "    print('HEAVY', sorted(m for m in heavy if m in sys.modules))\n")
    pytester.makepyfile(
        "import pytest\n"
        "@pytest.mark.roofline(min_fraction=0.5)\n"
        "def test_marked(roofline):\n"
        "    assert roofline.measure(sum, [1, 2]) == 3\n")
    # this plugin alone: another installed plugin may import numpy itself (the H100 runner's jaxtyping did)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider", "-p", "pytest_roofline.plugin")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*HEAVY []"])
    assert "HEAVY ['" not in result.stdout.str()
