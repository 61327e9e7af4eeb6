"""A single-layer LSTM: one fused cell kernel per layer on CPU (oneDNN) and CUDA (cuDNN)."""

from __future__ import annotations

import torch
from workloads import DEVICE, amp_variants, forward_step, train_step


def lstm_and_input() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(256, 256).to(DEVICE)
    return lstm, torch.randn(50, 16, 256, device=DEVICE)  # T=50, B=16


@amp_variants(fp32=0.2, amp=0.03)
def test_lstm_forward(roofline, amp):
    lstm, x = lstm_and_input()
    out, _ = roofline.measure(forward_step(lstm, x, amp=amp))
    assert out.shape == (50, 16, 256)


@amp_variants(fp32=0.2, amp=0.03)
def test_lstm_forward_backward(roofline, amp):
    lstm, x = lstm_and_input()
    loss = roofline.measure(train_step(lstm, x, amp=amp))
    assert torch.isfinite(loss)
