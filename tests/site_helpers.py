"""A synthetic history for the site's tests, from benchmarks/make_history.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def make_history_module() -> ModuleType:
    if "make_history" in sys.modules:
        return sys.modules["make_history"]
    spec = importlib.util.spec_from_file_location("make_history", ROOT / "benchmarks" / "make_history.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_history"] = module
    spec.loader.exec_module(module)
    return module


def write_history(directory: Path) -> list[Path]:
    """24 sessions over 2 machines (12 nights), 6 tests (3 matmul batch variants), a step at night 6."""
    return make_history_module().write_history(directory, sessions=24, tests=6, machines=2, step_at=0.5,
                                               artifacts=True)
