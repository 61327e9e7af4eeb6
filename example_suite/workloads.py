"""Helpers of the example suite: the device, AMP on/off, and step functions.

The same files run on a CPU (fp32, and bf16 autocast for AMP) and on a CUDA machine (fp16 autocast).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
import torch

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
AMP_DTYPE = torch.float16 if DEVICE.type == "cuda" else torch.bfloat16


def amp_variants(*, fp32: float, amp: float) -> pytest.MarkDecorator:
    """Run a test with AMP off and on, each with its own threshold (AMP is judged against the faster
    bf16/fp16 roof, so it reaches a smaller fraction of it)."""
    return pytest.mark.parametrize("amp", [
        pytest.param(False, id="fp32", marks=pytest.mark.roofline(min_fraction=fp32)),
        pytest.param(True, id="amp", marks=pytest.mark.roofline(min_fraction=amp)),
    ])


def autocast(enabled: bool) -> contextlib.AbstractContextManager[Any]:
    return torch.autocast(DEVICE.type, dtype=AMP_DTYPE) if enabled else contextlib.nullcontext()


def forward_step(module: torch.nn.Module, *inputs: torch.Tensor, amp: bool) -> Callable[[], Any]:
    """Inference: eval mode, no autograd graph."""
    module.eval()

    @torch.no_grad()
    def step() -> Any:
        with autocast(amp):
            return module(*inputs)

    return step


def train_step(module: torch.nn.Module, *inputs: torch.Tensor, amp: bool) -> Callable[[], Any]:
    """Forward + backward in training mode; gradients are reset so every call does the same work."""
    module.train()
    for tensor in inputs:
        tensor.requires_grad_(True)

    def step() -> torch.Tensor:
        module.zero_grad(set_to_none=True)
        for tensor in inputs:
            tensor.grad = None
        with autocast(amp):
            out = module(*inputs)
        loss = (out[0] if isinstance(out, tuple) else out).float().sum()
        loss.backward()
        return loss

    return step
