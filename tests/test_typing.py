"""The package type-checks (mypy, settings in pyproject.toml), as users who annotate with it rely on."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_passes_on_the_package(tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (it comes with the dev extra)")
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path), "pytest_roofline"],
                            cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-4000:]
