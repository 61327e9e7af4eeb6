"""DeepCAM blocks (MLPerf HPC's DeepLabv3+ with an Xception encoder) at CPU-sized inputs.

The encoder's middle-flow Xception block (depthwise-separable convolutions), the ASPP module (atrous
convolutions at rates 6/12/18 plus image pooling) and the decoder's upsampling block, each forward and
forward+backward, with AMP off and on. See deepcam_blocks.py for shapes and sources.
"""

from __future__ import annotations

import pytest
import torch
from deepcam_blocks import make_block
from workloads import DEVICE, amp_variants, forward_step, train_step

BLOCKS = ["xception_middle", "aspp", "decoder"]


@amp_variants(fp32=0.2, amp=0.03)
@pytest.mark.parametrize("block", BLOCKS)
def test_block_forward(roofline, block, amp):
    module, inputs = make_block(block, device=DEVICE)
    out = roofline.measure(forward_step(module, *inputs, amp=amp))
    assert torch.isfinite(out.float()).all()


@amp_variants(fp32=0.2, amp=0.03)
@pytest.mark.parametrize("block", BLOCKS)
def test_block_forward_backward(roofline, block, amp):
    module, inputs = make_block(block, device=DEVICE)
    loss = roofline.measure(train_step(module, *inputs, amp=amp))
    assert torch.isfinite(loss)
    assert all(p.grad is not None for p in module.parameters() if p.requires_grad)
