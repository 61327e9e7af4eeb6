"""Fixtures of the example suite."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["fp32", "amp"])
def amp(request: pytest.FixtureRequest) -> bool:
    """Each model test runs with AMP off (fp32) and on (bf16 autocast on CPU, fp16 on CUDA)."""
    return request.param == "amp"
