"""Held-out allocation-heavy calls for benchmarks/page_faults.py: each allocates its output afresh per call
(with benchmarks/heldout's conv2d, whose 4 MiB output is fresh every call too).

Measured and reported, never gated (no min_fraction).
"""

from __future__ import annotations

import pytest
import torch


@pytest.mark.roofline
def test_add_fresh_8mib_output(roofline):
    a, b = torch.ones(2 * 2**20), torch.ones(2 * 2**20)  # fp32: 8 MiB each, and 8 MiB of output per call
    out = roofline.measure(torch.add, a, b)
    assert float(out[-1]) == 2.0


@pytest.mark.roofline
def test_matmul_768x1024x768(roofline):
    torch.manual_seed(0)
    a, b = torch.randn(768, 1024), torch.randn(1024, 768)
    c = roofline.measure(torch.matmul, a, b)
    assert c.shape == (768, 768)


@pytest.mark.roofline
def test_add_fresh_64mib_output(roofline):
    # Above glibc's largest mmap threshold (32 MiB): only M_MMAP_MAX=0 keeps this output off fresh pages.
    a, b = torch.ones(16 * 2**20), torch.ones(16 * 2**20)
    out = roofline.measure(torch.add, a, b)
    assert float(out[-1]) == 2.0
