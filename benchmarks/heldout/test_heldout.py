"""Held-out workloads for the gate-stability benchmarks: not the example suite, not tuned against.

Measured and reported, never gated (no min_fraction): the benchmarks read their fractions from results.json.

    python benchmarks/gate_stability.py --neighbours 1 benchmarks/heldout
"""

from __future__ import annotations

import pytest
import torch


@pytest.mark.roofline
def test_conv2d(roofline):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(32, 64, 3, padding=1).eval()
    x = torch.randn(4, 32, 64, 64)
    with torch.no_grad():
        y = roofline.measure(conv, x)
    assert y.shape == (4, 64, 64, 64)


@pytest.mark.roofline
def test_gemm_fp32(roofline):
    torch.manual_seed(0)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    c = roofline.measure(torch.mm, a, b)
    assert c.shape == (1024, 1024)


@pytest.mark.roofline
def test_copy_128mib(roofline):
    src = torch.ones(32 * 2**20)  # 32 Mi fp32 elements = 128 MiB
    dst = torch.empty_like(src)
    roofline.measure(dst.copy_, src)
    assert float(dst[-1]) == 1.0


@pytest.mark.roofline
def test_add_cache_resident(roofline):
    a, b = torch.ones(16384), torch.ones(16384)  # 3 x 64 KiB: fits in L2
    out = torch.empty_like(a)
    roofline.measure(torch.add, a, b, out=out)
    assert float(out[0]) == 2.0


@pytest.mark.roofline
def test_lstm_small(roofline):
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(128, 128).eval()
    x = torch.randn(20, 8, 128)
    with torch.no_grad():
        y, _ = roofline.measure(lstm, x)
    assert y.shape == (20, 8, 128)
