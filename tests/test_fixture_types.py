"""The roofline fixture's public type: both recorders satisfy it, and the package says it is typed."""

from __future__ import annotations

from pathlib import Path

import pytest_roofline
from pytest_roofline import DeclaredMeasure, RooflineFixture
from pytest_roofline.counters.ncu.child import ChildRecorder
from pytest_roofline.measure.regions import Recorder
from pytest_roofline.model import Machine


def test_the_measuring_recorder_and_its_declared_regions_satisfy_the_protocols() -> None:
    machine = Machine("m", {"fp32": 1e9}, {"DRAM": 1e9})
    recorder = Recorder(enabled=False, machine=lambda: machine,
                        counter=lambda: None)  # type: ignore[arg-type,return-value]
    assert isinstance(recorder, RooflineFixture)
    declared = recorder.declare(flops=1e6)
    assert isinstance(declared, DeclaredMeasure)
    assert declared.measure(lambda x: x + 1, 1) == 2  # disabled: called once, result returned


def test_the_ncu_child_recorder_satisfies_it_too() -> None:
    assert isinstance(ChildRecorder(), RooflineFixture)


def test_the_package_ships_py_typed() -> None:
    assert (Path(pytest_roofline.__file__).parent / "py.typed").is_file()
    pyproject = (Path(pytest_roofline.__file__).parent.parent / "pyproject.toml").read_text()
    assert '"py.typed"' in pyproject
