"""A 3x3 convolution, the workhorse of DeepCAM's encoder and decoder."""

from __future__ import annotations

import torch
from workloads import DEVICE, amp_variants, forward_step, train_step


def conv_and_input() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).to(DEVICE)
    return conv, torch.randn(8, 64, 56, 56, device=DEVICE)


@amp_variants(fp32=0.2, amp=0.03)
def test_conv2d_forward(roofline, amp):
    conv, x = conv_and_input()
    y = roofline.measure(forward_step(conv, x, amp=amp))
    assert y.shape == (8, 64, 56, 56)


@amp_variants(fp32=0.2, amp=0.03)
def test_conv2d_forward_backward(roofline, amp):
    conv, x = conv_and_input()
    loss = roofline.measure(train_step(conv, x, amp=amp))
    assert torch.isfinite(loss)
    assert conv.weight.grad is not None and x.grad is not None
