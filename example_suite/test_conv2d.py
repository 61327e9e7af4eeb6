"""A 3x3 convolution, the workhorse of DeepCAM's encoder and decoder: batch 8 on a CPU, 32 on a GPU.

fp32 on a GPU runs as TF32 on Tensor Cores (cuDNN's default) and is judged on that roof."""

from __future__ import annotations

import torch
from workloads import DEVICE, amp_variants, forward_step, per_device, train_step

BATCH = per_device(cpu=8, cuda=32)


def conv_and_input() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).to(DEVICE)
    return conv, torch.randn(BATCH, 64, 56, 56, device=DEVICE)


@amp_variants(fp32={"cpu": 0.2, "cuda": 0.04}, amp={"cpu": 0.03, "cuda": 0.015})
def test_conv2d_forward(roofline, amp):
    conv, x = conv_and_input()
    y = roofline.measure(forward_step(conv, x, amp=amp))
    assert y.shape == (BATCH, 64, 56, 56)


@amp_variants(fp32={"cpu": 0.2, "cuda": 0.02}, amp={"cpu": 0.03, "cuda": 0.005})
def test_conv2d_forward_backward(roofline, amp):
    conv, x = conv_and_input()
    loss = roofline.measure(train_step(conv, x, amp=amp))
    assert torch.isfinite(loss)
    assert conv.weight.grad is not None and x.grad is not None
