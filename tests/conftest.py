"""Shared fixtures of the plugin's own tests: inner pytester runs under ``--roofline`` with pinned ceilings."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner pytester runs must not believe they are xdist workers because this suite runs under ``-n``: a
    worker writes no results.json and pins itself to a share of the cores."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


# In-process runs after other tests imported the plugin warn that it cannot be assertion-rewritten.
FAST = ("--roofline-max-time", "0.05", "-p", "no:cacheprovider",
        "-W", "ignore::pytest.PytestAssertRewriteWarning")


@pytest.fixture
def fast_args() -> tuple[str, ...]:
    """Arguments for a quick inner ``--roofline`` run: a 50 ms budget per call site, no cache provider."""
    return FAST


@pytest.fixture
def write_machine(pytester: pytest.Pytester) -> Callable[[Mapping[str, Any]], Path]:
    """Write pinned machine ceilings into the pytester directory; returns the file's path."""

    def write(machine: Mapping[str, Any]) -> Path:
        path = pytester.path / "machine.json"
        path.write_text(json.dumps(machine))
        return path

    return write


@pytest.fixture
def run_roofline(pytester: pytest.Pytester) -> Callable[..., pytest.RunResult]:
    """Run the pytester suite in-process under ``--roofline`` against pinned ceilings, quickly."""

    def run(machine_file: Path, *args: str) -> pytest.RunResult:
        return pytester.runpytest("--roofline", "--roofline-machine", str(machine_file), *FAST, *args)

    return run
