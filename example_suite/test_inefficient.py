"""What a failure looks like: a matrix product computed one row at a time.

1024 tiny vector-matrix products instead of one GEMM: the same FLOPs, but each op is too small to keep
the machine busy (per-op dispatch costs more than its 16 KB of traffic), so the attained fraction
collapses whichever memory level the bytes are judged against. Marked xfail(strict=True) while the gate is on
(``--roofline`` without ``--roofline-warn-only``): the gate must catch it; its chart and kernel table land in the
roofline directory. Without the gate (``pytest example_suite``, or ``--roofline-warn-only``) it is a plain
correctness test and passes.
"""

from __future__ import annotations

import pytest
import torch
from workloads import DEVICE

from pytest_roofline.plugin.markers import gating  # noqa: F401 - named in the xfail condition below


@pytest.mark.xfail("gating(config)", strict=True,
                   reason="deliberately inefficient: row-by-row matmul must fail the gate")
@pytest.mark.roofline(min_fraction=0.5)
def test_row_by_row_matmul(roofline):
    torch.manual_seed(0)
    a = torch.randn(1024, 64, device=DEVICE)
    b = torch.randn(64, 64, device=DEVICE)

    @torch.no_grad()
    def row_by_row() -> torch.Tensor:
        return torch.stack([row @ b for row in a])

    c = roofline.measure(row_by_row)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
