"""DeepCAM blocks (MLPerf HPC's DeepLabv3+ with an Xception encoder): reduced inputs on a CPU, the benchmark's
resolution at batch 32 on a GPU (the decoder, whose maps are 16x larger, at batch 16): see deepcam_blocks.py.

The encoder's middle-flow Xception block (depthwise-separable convolutions), the ASPP module (atrous
convolutions at rates 6/12/18 plus image pooling) and the decoder's upsampling block, each forward and
forward+backward, with AMP off and on. See deepcam_blocks.py for shapes and sources.
"""

from __future__ import annotations

import pytest
import torch
from deepcam_blocks import CUDA_SIZES, REDUCED_CPU_SIZES, make_block
from workloads import DEVICE, amp_variants, forward_step, per_device, train_step

BLOCKS = ["xception_middle", "aspp", "decoder"]
SIZES = per_device(cpu=REDUCED_CPU_SIZES, cuda=CUDA_SIZES)


@amp_variants(fp32={"cpu": 0.2, "cuda": 0.045}, amp={"cpu": 0.03, "cuda": 0.015})
@pytest.mark.parametrize("block", BLOCKS)
def test_block_forward(roofline, block, amp):
    module, inputs = make_block(block, SIZES, device=DEVICE)
    out = roofline.measure(forward_step(module, *inputs, amp=amp))
    assert torch.isfinite(out.float()).all()


@amp_variants(fp32={"cpu": 0.2, "cuda": 0.02}, amp={"cpu": 0.03, "cuda": 0.01})
@pytest.mark.parametrize("block", BLOCKS)
def test_block_forward_backward(roofline, block, amp):
    module, inputs = make_block(block, SIZES, device=DEVICE)
    loss = roofline.measure(train_step(module, *inputs, amp=amp))
    assert torch.isfinite(loss)
    assert all(p.grad is not None for p in module.parameters() if p.requires_grad)
