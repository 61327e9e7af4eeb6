"""CUDA characterization (placeholder until the ERT kernels land)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_roofline.model import Machine


def characterize_cuda(index: int, fingerprint_fields: dict[str, Any], progress: Callable[[str], None]) -> Machine:
    raise NotImplementedError("CUDA characterization is not implemented yet")
