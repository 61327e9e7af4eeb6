"""The same slowdown injection as benchmarks/heldout (for benchmarks/gate_sensitivity.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("heldout_injection",
                                               Path(__file__).parent.parent / "heldout" / "conftest.py")
assert _spec is not None and _spec.loader is not None
_injection = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_injection)
roofline = _injection.roofline
pytest_collection_modifyitems = _injection.pytest_collection_modifyitems
