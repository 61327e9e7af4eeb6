"""Code PyTorch cannot see: a numpy GEMM whose work the test declares (2*n^3 FLOPs, 3 matrices moved)."""

from __future__ import annotations

import numpy as np
import pytest

N = 512


@pytest.mark.roofline(min_fraction=0.2)
def test_numpy_gemm_declared(roofline):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((N, N)), rng.standard_normal((N, N))
    c = roofline.declare(flops=2 * N**3, bytes=3 * N * N * 8, precision="fp64", name="numpy.matmul").measure(
        np.matmul, a, b
    )
    np.testing.assert_allclose(c[:4, :4], a[:4] @ b[:, :4])
