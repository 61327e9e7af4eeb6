"""A single-layer LSTM: one fused cell kernel per layer on CPU (oneDNN) and CUDA (cuDNN).

256 units, batch 16 on a CPU; on a GPU 1024 units, batch 64 (a DeepBench-style recurrent layer; 64x the FLOPs)."""

from __future__ import annotations

import torch
from workloads import DEVICE, amp_variants, forward_step, per_device, train_step

T = 50
UNITS, BATCH = per_device(cpu=(256, 16), cuda=(1024, 64))


def lstm_and_input() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(UNITS, UNITS).to(DEVICE)
    return lstm, torch.randn(T, BATCH, UNITS, device=DEVICE)


@amp_variants(fp32={"cpu": 0.2, "cuda": 0.002}, amp={"cpu": 0.03, "cuda": 0.003})
def test_lstm_forward(roofline, amp):
    lstm, x = lstm_and_input()
    out, _ = roofline.measure(forward_step(lstm, x, amp=amp))
    assert out.shape == (T, BATCH, UNITS)


@amp_variants(fp32={"cpu": 0.2, "cuda": 0.006}, amp={"cpu": 0.03, "cuda": 0.008})
def test_lstm_forward_backward(roofline, amp):
    lstm, x = lstm_and_input()
    loss = roofline.measure(train_step(lstm, x, amp=amp))
    assert torch.isfinite(loss)
