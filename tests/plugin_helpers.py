"""Shared by the pytester-based plugin tests: a pinned machine file and a quick ``--roofline`` run."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

# In-process runs after other tests imported the plugin warn that it cannot be assertion-rewritten.
FAST = ("--roofline-max-time", "0.05", "-p", "no:cacheprovider",
        "-W", "ignore::pytest.PytestAssertRewriteWarning")


def write_machine(pytester: pytest.Pytester, machine: Mapping[str, Any]) -> Path:
    path = pytester.path / "machine.json"
    path.write_text(json.dumps(machine))
    return path


def run(pytester: pytest.Pytester, machine_file: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--roofline", "--roofline-machine", str(machine_file), *FAST, *args)
