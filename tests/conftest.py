"""Shared fixtures of the plugin's own tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner pytester runs must not believe they are xdist workers because this suite runs under ``-n``: a
    worker writes no results.json and pins itself to a share of the cores."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
